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
  DTW_TODO("05.7: Measure the bubble from the timeline: the share of the ranks' time, over the pipeline's span, not spent in its compute phases.");
}

}  // namespace dtw::ch05
