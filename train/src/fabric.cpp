// The modeled fabric: the replay of a trace on a cluster (the named clusters
// are in clusters.cpp). replay_on reads the trace and puts together the parts
// in replay.h: compute and link timing (replay_timing.cpp), matching
// (replay_match.cpp), and the event list and worklist (replay_schedule.cpp).
#include "dtw/train/fabric.h"

#include <atomic>
#include <utility>

#include "dtw/errors.h"
#include "replay.h"
#include "replay_work.h"

namespace dtw::train {

namespace {
std::atomic<std::int64_t> g_replay_looks{0};
}  // namespace

std::int64_t replay_looks() { return g_replay_looks.load(); }

Replay replay_on(const std::vector<TraceEvent>& trace, int world, const Cluster& cluster) {
  DTW_CHECK_ARG(world >= 1, "replay_on: world " << world << " must be at least 1");
  Replay out;
  // The events that take time: compute phases (outermost only) and messages.
  for (const TraceEvent& e : trace) {
    if (e.category != "compute" && (e.category != "comm" || e.peer < 0)) continue;
    DTW_CHECK_ARG(e.rank >= 0 && e.rank < world,
                  "replay_on: an event of rank " << e.rank << " in a world of " << world);
    out.events.push_back(e);
  }
  std::int64_t looks = 0;  // work done, for replay_looks()
  const replay::Calls calls = replay::time_computes(out.events, world, cluster);
  const replay::Collectives collectives =
      replay::group_collectives(out.events, cluster.device_progress);
  replay::LinkTiming links(out.events, cluster, replay::pair_messages(out.events), looks);
  const replay::Placed placed =
      replay::schedule(out.events, world, cluster, calls, collectives, links, looks);
  out.unmodeled = calls.unmodeled;
  out.unmatched = placed.unmatched;
  // The modeled events, without the dropped inner phases.
  std::vector<TraceEvent> modeled;
  for (std::size_t i = 0; i < out.events.size(); ++i) {
    if (calls.dropped[i]) continue;
    TraceEvent e = out.events[i];
    e.start_us = placed.start[i] * 1e6;
    e.end_us = placed.end[i] * 1e6;
    modeled.push_back(std::move(e));
  }
  out.events = std::move(modeled);
  g_replay_looks.fetch_add(looks, std::memory_order_relaxed);
  out.timeline = analyze_timeline(out.events, world);
  out.seconds = out.timeline.span;
  return out;
}

}  // namespace dtw::train
