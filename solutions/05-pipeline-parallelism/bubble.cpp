// The bubble, measured: what a timeline says about a schedule. The formulas
// of the chapter's cost model, (p−1)/(m+p−1) for GPipe and 1F1B and
// (p−1)/(v·m+p−1) interleaved, assume equal stages and free messages; a
// timeline says what a run did. Its bubble is the share of the ranks' time
// inside the pipeline's span that no rank spent computing:
//
//     rank 0  |F0|F1|      |B1B1|B0B0|        compute: what the phases cover
//     rank 1     |F0|F1|B1B1|B0B0|
//             <----------- span ----------->  bubble = 1 − Σ compute / (p · span)
//
// Only the pipeline's own phases count (a stage ≥ 0): the optimizer's step
// after the last backward is the same on every schedule and not part of it.
#include <algorithm>
#include <vector>

#include "dtw/errors.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {

double pipeline_bubble(const std::vector<TraceEvent>& events, int ranks) {
  DTW_CHECK_ARG(ranks >= 1, "pipeline_bubble: " << ranks << " ranks (at least 1)");
  // @lab 05.7: Measure the bubble from the timeline: the share of the ranks' time, over the pipeline's span, not spent in its compute phases.
  // @hint 1: The bubble is the idle share of the pipeline: p ranks over the span from the first
  // @hint 1: forward to the last backward offer p × span of rank-time, and the stages' compute
  // @hint 1: phases fill part of it. Only the pipeline's phases count, on every rank; nothing else
  // @hint 1: of the trace does.
  // @hint 2: for each event: skip it unless it is a compute phase of a stage; check its rank; add
  // @hint 2: its length to the busy time; track the earliest start and the latest end. Then
  // @hint 2: 1 − busy / (p · (last − first)). Traps: the span starts at the first phase, not at 0
  // @hint 2: (the launch, the set-up); the optimizer is a compute phase without a stage; the events
  // @hint 2: are not sorted; no phase at all is an error, not a division by zero.
  // @hint 3: e.category == "compute", e.stage >= 0, e.rank, e.start_us, e.end_us; DTW_CHECK_ARG
  // @hint 3: for the rank ("pipeline_bubble: ... rank R ... outside [0, P)") and for no phase
  // @hint 3: ("pipeline_bubble: no compute phase of a pipeline stage").
  double first = 0, last = 0, busy = 0;
  bool any = false;
  for (const TraceEvent& e : events) {
    if (e.category != "compute" || e.stage < 0) continue;
    DTW_CHECK_ARG(e.rank >= 0 && e.rank < ranks, "pipeline_bubble: a " << e.name << " phase of rank "
                                                                       << e.rank << ", outside [0, "
                                                                       << ranks << ")");
    first = any ? std::min(first, e.start_us) : e.start_us;
    last = any ? std::max(last, e.end_us) : e.end_us;
    any = true;
    busy += e.end_us - e.start_us;
  }
  DTW_CHECK_ARG(any, "pipeline_bubble: no compute phase of a pipeline stage among "
                         << events.size() << " events");
  return last > first ? 1 - busy / (ranks * (last - first)) : 0.0;
  // @end
}

}  // namespace dtw::ch05
