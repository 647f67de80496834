// @solution-only: the schedule behind PendingCollective (not a lab step; tools/gen-labs skips this file)
#pragma once
#include <vector>

#include "dtw/comm.h"
#include "nonblocking.h"

namespace dtw::ch01::detail {

// A collective in flight: rounds of requests on `channel`, posted one after
// another by advance(), then finish() (local work: the kAvg division, the
// copy of a reduce-scatter's chunk). Registers itself with this rank's
// progress engine for its whole life (nonblocking_engine.cpp).
struct Schedule {
  explicit Schedule(Comm& channel);
  virtual ~Schedule();
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  // Posts the requests of round `round` (0, 1, ...) into `requests`; returns
  // false, posting nothing, once there is no such round.
  virtual bool post_round(int round, std::vector<Request>& requests) = 0;
  // Local work after the last round.
  virtual void finish() {}

  // Posts round 0 (call once the derived object is built).
  void start();
  // Completes what can complete without blocking, posting the rounds that
  // follow; true once the whole collective is complete.
  bool advance();
  // Blocks until complete, advancing every schedule in flight on the channel.
  void wait();
  bool complete() const { return complete_; }
  Comm& channel() const { return channel_; }

 private:
  Comm& channel_;
  std::vector<Request> requests_;  // the current round
  int round_ = 0;
  bool complete_ = false;
};

}  // namespace dtw::ch01::detail
