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
  // @lab 08.3: Sum the gradients over the replicas (under ZeRO-1: reduce-scatter them), agree on the norm and the loss counting each thing once, clip, step, and under ZeRO-1 gather the stepped parameters.
  // @hint 1: The replicas saw different rows: their gradients must be summed, on the group of
  // @hint 1: ranks that hold the same stage and slice. Then one sum over every rank gives the norm
  // @hint 1: and the loss, if each term is counted once: after the sum, every replica holds the same
  // @hint 1: gradient (unless ZeRO-1 split it), and the last stage's tp ranks share one loss.
  // @hint 2: For each range of `stepped` (the stage's ranges before ZeRO-1 cut them; the head's
  // @hint 2: copy of wte is not one, its share already went to the embedding's stage): allreduce
  // @hint 2: its gradient over dp, or under ZeRO-1 reduce-scatter it over dp so that this replica's
  // @hint 2: chunk holds the sum. Then {Σ g² on replica 0 only (every replica under ZeRO-1), the
  // @hint 2: loss on tp slice 0 only} summed over the world. Clip and step inside an "optimizer"
  // @hint 2: phase; under ZeRO-1 allgather each range's parameters in place over dp.
  // @hint 3: replica.grads(r); ch01::allreduce(*groups.dp, span, ReduceOp::kSum);
  // @hint 3: ch01::reduce_scatter(*groups.dp, g, g.subspan(chunks.offset(d), chunks.size(d)),
  // @hint 3: ReduceOp::kSum) with Chunks chunks(r.size(), layout.dp); replica.local_sum_of_squares();
  // @hint 3: ch01::allreduce(*groups.world, std::span<double>(sums), ReduceOp::kSum);
  // @hint 3: end.run.phase("optimizer", {.flops = c.flops, .bytes = c.bytes}) with c =
  // @hint 3: replica.optimizer_cost(); replica.clip(sums[0]); replica.step(end.step);
  // @hint 3: ch01::allgather_in_place(*groups.dp, replica.params(r)).
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
  const int d = groups.dp->rank();
  if (layout.zero1) {
    for (const train::Range& r : stepped) {
      const std::span<T> g = replica.grads(r);
      const Chunks chunks(r.size(), layout.dp);
      ch01::reduce_scatter(*groups.dp, g, g.subspan(static_cast<std::size_t>(chunks.offset(d)),
                                                    static_cast<std::size_t>(chunks.size(d))),
                           ReduceOp::kSum);
    }
  } else {
    for (const train::Range& r : stepped) ch01::allreduce(*groups.dp, replica.grads(r), ReduceOp::kSum);
  }
  // Replicas hold equal gradients after the allreduce (not after the
  // reduce-scatter: each then holds its own chunk), and the last stage's tp
  // ranks all know the same loss: count each once, in one allreduce.
  const bool counts_norm = layout.zero1 || d == 0;
  sums = {counts_norm ? replica.local_sum_of_squares() : 0.0, groups.tp->rank() == 0 ? end.loss : 0.0};
  ch01::allreduce(*groups.world, std::span<double>(sums), ReduceOp::kSum);
  {
    const train::Cost c = replica.optimizer_cost();
    auto phase = end.run.phase("optimizer", {.flops = c.flops, .bytes = c.bytes});
    replica.clip(sums[0]);
    replica.step(end.step);
  }
  if (layout.zero1)
    for (const train::Range& r : stepped) ch01::allgather_in_place(*groups.dp, replica.params(r));
  // @end
  return sums[1];
}

template double hybrid_end_of_step<float>(const Groups&, const Layout&, std::span<const train::Range>,
                                          const ch05::StepEnd<float>&);
template double hybrid_end_of_step<double>(const Groups&, const Layout&, std::span<const train::Range>,
                                          const ch05::StepEnd<double>&);

}  // namespace dtw::ch08
