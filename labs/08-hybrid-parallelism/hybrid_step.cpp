// Step 08.3: the end of a hybrid step -- which group each reduction of the
// step runs on.
//
// After the pipeline's last backward, each rank holds its replica's gradient
// of its slice of its stage; the sums left, and which ranks count in each,
// are this step (the chapter text: "The end of a step: count each thing
// once"). Bytes per step on the dp group: 2(dp−1)/dp · |stepped ranges| · e
// per rank (ring allreduce); ZeRO-1 sends the same, as a reduce-scatter
// before the step and an allgather after it.
#include <array>

#include "collectives.h"  // chapter 01 (DEPENDS 01)
#include "dtw/chunks.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

template <TrainElement T>
double hybrid_end_of_step(const Groups& groups, const Layout& layout,
                          std::span<const train::Range> stepped, const ch05::StepEnd<T>& end) {
  train::Replica<T>& replica = end.replica;
  std::array<double, 2> sums{0, 0};  // Σ g², loss
  DTW_TODO("08.3: Sum the gradients over the replicas (under ZeRO-1: reduce-scatter them), agree on the norm and the loss counting each thing once, clip, step, and under ZeRO-1 gather the stepped parameters.");
  return sums[1];
}

template double hybrid_end_of_step<float>(const Groups&, const Layout&, std::span<const train::Range>,
                                          const ch05::StepEnd<float>&);
template double hybrid_end_of_step<double>(const Groups&, const Layout&, std::span<const train::Range>,
                                          const ch05::StepEnd<double>&);

}  // namespace dtw::ch08
