#pragma once
// The parts of train::replay_on (fabric.cpp), internal to train/src. The
// replay rules are in dtw/train/fabric.h; each part here does one of them:
//
//   replay_timing.cpp    compute timing (a phase's modeled duration, where in
//                        it a call lands) and link timing (when a message
//                        completes, from the posts of its two halves);
//   replay_match.cpp     matching: sends paired with receives, and on a
//                        device the rounds of each collective and the lanes
//                        (streams) they run on;
//   replay_schedule.cpp  the event list (each rank's starts, ends, posts and
//                        waits in its own order) and the worklist that
//                        advances ranks and lanes until every call is placed.
//
// Events are indices into the replay's list of events (compute phases and
// messages, in trace order).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dtw/trace.h"
#include "dtw/train/fabric.h"

namespace dtw::train::replay {

// ---- compute timing (replay_timing.cpp) ----

// Each rank's events that take time, and the compute phases' modeled times.
struct Calls {
  std::vector<std::vector<std::size_t>> computes;  // per rank: its compute phases, by start
  std::vector<std::vector<std::size_t>> comms;     // per rank: its messages, in trace order
  std::vector<double> duration;  // per event: modeled seconds of a compute phase, else 0
  std::vector<bool> dropped;     // per event: a compute phase inside another of its rank
  int unmodeled = 0;             // compute phases without FLOPs or bytes on a device model
};

// Sorts `events` (of ranks below `world`) into Calls, timing each compute
// phase on `cluster`'s device, or keeping its measured time.
Calls time_computes(const std::vector<TraceEvent>& events, int world, const Cluster& cluster);

// Where in compute phase `c` the call `e` was posted, as a share of the
// phase (of its work when `by_work` and the trace has a work clock that
// moved during the phase, else of its measured time).
double share_before(const TraceEvent& e, const TraceEvent& c, bool by_work);

// ---- matching (replay_match.cpp) ----

// A message's two halves: its modeled post and its partner.
struct Message {
  double post = -1;         // modeled post time, −1 until posted
  std::size_t partner = 0;  // index of the other half
  bool matched = false;
};

// Pairs sends with receives in posting order per (source, destination, tag,
// collective channel or not: a collective's tag is not a user's); one
// Message per event (unused for compute phases).
std::vector<Message> pair_messages(const std::vector<TraceEvent>& events);

// On a device, the messages of one collective on one rank (rank, channel,
// tag) form a group, and the groups of one (rank, channel) a lane: the
// communicator's stream, which runs its collectives one after another and
// the rounds of each as they arrive.
struct Collectives {
  std::vector<int> group;                         // per event: its group, or −1
  std::vector<std::vector<std::size_t>> members;  // per group, in posting order
  std::vector<std::vector<std::size_t>> by_end;   // per group, by host end
  std::vector<std::vector<std::size_t>> lanes;    // per (rank, channel), group by group
};

// The groups and lanes of `events`; none (every group −1) unless `device`.
Collectives group_collectives(const std::vector<TraceEvent>& events, bool device);

// ---- link timing (replay_timing.cpp) ----

// When a message completes: at the later post of its halves plus α + n·β
// of the link it crosses (plus the reduction's 3n bytes of memory traffic
// for a recv_reduce); an unmatched half at its own post plus the link.
class LinkTiming {
 public:
  LinkTiming(const std::vector<TraceEvent>& events, const Cluster& cluster,
             std::vector<Message> messages, std::int64_t& looks)
      : events_(events), cluster_(cluster), messages_(std::move(messages)), looks_(looks) {}
  // The modeled completion of message `i`, or −1 while a half is not posted
  // (missing() then names that half).
  double completion(std::size_t i);
  // The unposted half the last completion of −1 waited for.
  std::size_t missing() const { return missing_; }
  // The message of event `i`.
  Message& message(std::size_t i) { return messages_[i]; }

 private:
  const std::vector<TraceEvent>& events_;
  const Cluster& cluster_;
  std::vector<Message> messages_;
  std::int64_t& looks_;
  std::size_t missing_ = 0;
};

// ---- the event list and the worklist (replay_schedule.cpp) ----

// Modeled times of every event (seconds).
struct Placed {
  std::vector<double> start, end;
  int unmatched = 0;  // communication calls without a partner
};

// Places every event of `events` (sorted by time_computes, paired by
// `links`, grouped by `collectives`) on `cluster`, each rank's calls in
// order. InvalidArgument naming a rank and what it waits for when the trace
// cannot complete. Adds its work to `looks`.
Placed schedule(const std::vector<TraceEvent>& events, int world, const Cluster& cluster,
                const Calls& calls, const Collectives& collectives, LinkTiming& links,
                std::int64_t& looks);

}  // namespace dtw::train::replay
