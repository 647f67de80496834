// @solution-only: the progress engine of the non-blocking collectives (not a lab step; tools/gen-labs skips this file)
//
// A non-blocking collective is a schedule: a list of rounds, each a few
// point-to-point requests, where a round may start only once the one before
// it has completed (in a ring, step s+1 forwards what step s received). Nobody
// runs the schedule in the background: it advances when its rank calls test()
// or wait() -- on any collective in flight on the same communicator, because
// a rank waiting for one collective must not leave another one stuck that a
// neighbour is waiting for. So every rank thread keeps a registry of the
// schedules it has in flight, per communicator, and each test or wait
// advances them all.
//
// Blocking: wait() blocks in Comm::wait_any over the current round of every
// schedule in flight on the communicator, so the rank wakes as soon as any of
// them can move on, and the threads backend's deadlock detector sees exactly
// what the rank waits for.
#include <algorithm>
#include <map>
#include <vector>

#include "nonblocking_schedule.h"

namespace dtw::ch01 {
namespace detail {
namespace {

// This rank's schedules in flight, per communicator (ranks are threads, so
// thread_local is per rank; one process per rank on MPI).
std::vector<Schedule*>& in_flight(const Comm& channel) {
  thread_local std::map<const Comm*, std::vector<Schedule*>> registry;
  return registry[&channel];
}

// Advances every schedule in flight on `channel` as far as possible.
void advance_all(Comm& channel) {
  // A copy: advancing may finish (never add or remove) schedules.
  const std::vector<Schedule*> all = in_flight(channel);
  for (Schedule* s : all) s->advance();
}

}  // namespace

Schedule::Schedule(Comm& channel) : channel_(channel) { in_flight(channel_).push_back(this); }

Schedule::~Schedule() {
  std::erase(in_flight(channel_), this);
  // Requests still pending are dropped with the schedule: the runtime reports
  // them like any Request destroyed before its wait.
}

void Schedule::start() { advance(); }

bool Schedule::advance() {
  while (!complete_) {
    for (Request& r : requests_)
      if (r.pending() && !channel_.test(r)) return false;
    requests_.clear();
    if (post_round(round_, requests_)) {
      ++round_;
      continue;  // a round whose messages are already there completes at once
    }
    finish();
    complete_ = true;
  }
  return true;
}

void Schedule::wait() {
  while (!advance()) {
    advance_all(channel_);
    if (complete_) return;
    // Block until any request of any schedule in flight here completes: the
    // requests move into one span for wait_any and back to their schedules.
    std::vector<Request> pending;
    std::vector<Request*> home;
    for (Schedule* s : in_flight(channel_)) {
      for (Request& r : s->requests_) {
        if (!r.pending()) continue;
        home.push_back(&r);
        pending.push_back(std::move(r));
      }
    }
    const auto back = [&] {
      for (std::size_t i = 0; i < pending.size(); ++i) *home[i] = std::move(pending[i]);
    };
    try {
      (void)channel_.wait_any(pending);
    } catch (...) {
      back();
      throw;
    }
    back();
  }
}

}  // namespace detail

PendingCollective::PendingCollective() = default;
PendingCollective::PendingCollective(std::unique_ptr<detail::Schedule> schedule)
    : schedule_(std::move(schedule)) {}
PendingCollective::PendingCollective(PendingCollective&&) noexcept = default;
PendingCollective& PendingCollective::operator=(PendingCollective&&) noexcept = default;
PendingCollective::~PendingCollective() = default;

bool PendingCollective::test() {
  if (!schedule_ || schedule_->complete()) return true;
  detail::advance_all(schedule_->channel());
  return schedule_->complete();
}

void PendingCollective::wait() {
  if (schedule_) schedule_->wait();
}

bool PendingCollective::done() const { return !schedule_ || schedule_->complete(); }

}  // namespace dtw::ch01
