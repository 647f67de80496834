// The replay's clocks: how long a compute phase takes on the cluster's
// device (or took here), where in it a call lands, and when a message
// completes on the link it crosses.
#include <algorithm>

#include "dtw/errors.h"
#include "replay.h"

namespace dtw::train::replay {

Calls time_computes(const std::vector<TraceEvent>& events, int world, const Cluster& cluster) {
  const std::size_t n = events.size();
  Calls calls;
  calls.computes.resize(static_cast<std::size_t>(world));
  calls.comms.resize(static_cast<std::size_t>(world));
  calls.duration.assign(n, 0);
  calls.dropped.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const TraceEvent& e = events[i];
    if (e.category != "compute") {
      calls.comms[static_cast<std::size_t>(e.rank)].push_back(i);
      continue;
    }
    calls.computes[static_cast<std::size_t>(e.rank)].push_back(i);
    if (cluster.measured_compute) {
      calls.duration[i] = (e.end_us - e.start_us) * 1e-6;
    } else {
      // A device's time is its work: matrix products at its FLOP rate, the
      // element-wise rest at its memory bandwidth.
      if (e.flops <= 0 && e.bytes <= 0) ++calls.unmodeled;
      calls.duration[i] = (e.flops > 0 ? e.flops / cluster.flops : 0) +
                          (e.bytes > 0 ? static_cast<double>(e.bytes) / cluster.memory_bw : 0);
    }
  }
  // A compute phase inside another of the same rank is part of it.
  for (auto& list : calls.computes) {
    std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return events[a].start_us < events[b].start_us;
    });
    double reach = -1e300;
    for (std::size_t i : list) {
      if (events[i].end_us <= reach) calls.dropped[i] = true;
      else reach = events[i].end_us;
    }
  }
  return calls;
}

// On a device model, a share of the phase's work (the work clock's FLOPs)
// when the trace has a work clock that moved during the phase, because a
// device's time is its work and this machine's forward and backward need not
// take the same shares of a step as a GPU's; else (this-machine, or no work
// clock) of its measured time.
double share_before(const TraceEvent& e, const TraceEvent& c, bool by_work) {
  if (by_work && c.work_start >= 0 && c.work_end > c.work_start && e.work_start >= 0)
    return std::clamp((e.work_start - c.work_start) / (c.work_end - c.work_start), 0.0, 1.0);
  return (e.start_us - c.start_us) / (c.end_us - c.start_us);
}

double LinkTiming::completion(std::size_t i) {
  ++looks_;
  const Message& m = messages_[i];
  const TraceEvent& e = events_[i];
  if (m.post < 0) {
    missing_ = i;
    return -1;
  }
  if (!m.matched)
    return m.post + cluster_.link(e.rank, e.peer).seconds(static_cast<double>(e.bytes));
  const double other = messages_[m.partner].post;
  if (other < 0) {
    missing_ = m.partner;
    return -1;
  }
  // Sends are synchronous: the message moves once both halves are posted.
  const std::size_t send = e.is_send ? i : m.partner, recv = e.is_send ? m.partner : i;
  const double bytes = static_cast<double>(events_[send].bytes);
  double t = std::max(m.post, other) + cluster_.link(e.rank, e.peer).seconds(bytes);
  if (events_[recv].name == "recv_reduce") t += 3 * bytes / cluster_.memory_bw;
  return t;
}

}  // namespace dtw::train::replay
