// Step 08.3: the end of a hybrid step -- which group each reduction of the
// step runs on.
//
// After the pipeline's last backward, the rank (stage s, replica d, slice k)
// holds the gradient of replica d's micro-batches for its slice k of stage
// s's units (each micro-batch weighted by its rows / the global batch, so
// the sum over the replicas is the batch's mean gradient). Two sums are left:
//
//     what                        over         counted on
//     the gradient                dp           every replica (they saw different rows)
//     {Σ g², loss}                the world    Σ g²: replica 0 only (after the sum every replica
//                                              holds the same gradient; under ZeRO-1 each holds
//                                              its own chunk: all), replicated tensors on slice 0
//                                              only (Replica::local_sum_of_squares); the loss on
//                                              slice 0 of the last stage (its tp ranks share it)
//
// Bytes per step on the dp group: 2(dp−1)/dp · |stage slice| · e per rank
// (ring allreduce); ZeRO-1 sends the same, as a reduce-scatter before the
// step and an allgather of the stepped parameters after it.
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
