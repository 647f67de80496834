// ZeRO-1: shard the optimizer state, and only that.
//
// In DDP every rank runs the same optimizer step on the same gradient and the
// same state: p identical copies of the Adam moments, which with mixed
// precision are most of the memory (12 of 16 bytes per parameter). ZeRO-1
// keeps one copy, cut into p shards: rank r steps only the chunks it owns.
// The step itself needs three moves instead of DDP's one allreduce:
//
//   backward            every rank: the full gradient of its rows
//   reduce-scatter      rank r: the SUM of chunk r over the ranks (in place)
//   step                rank r: Adam on chunk r only (its moments, its chunk)
//   allgather           every rank: every rank's freshly stepped chunk
//
//        unit u on 3 ranks, before           after reduce-scatter     after step + allgather
//   r0 [ g0 g0 | g0 g0 | g0 ]            [ Σg ·· | ·· ·· | ·· ]     [ θ0' | θ1' | θ2' ]
//   r1 [ g1 g1 | g1 g1 | g1 ]   ──RS──►  [ ·· ·· | Σg Σg | ·· ]  ►  [ θ0' | θ1' | θ2' ]
//   r2 [ g2 g2 | g2 g2 | g2 ]            [ ·· ·· | ·· ·· | Σg ]     [ θ0' | θ1' | θ2' ]
//
// A ring allreduce IS a reduce-scatter followed by an allgather (chapter 01),
// so ZeRO-1 sends exactly DDP's bytes, 2Ψ(p−1)/p values per rank per step:
// it only moves the optimizer step between the two halves, where each rank
// has one chunk and nothing else to step. The memory saved is free.
//
// Both collectives work in place on the unit's own memory: chunk r of the
// unit is where chapter 01's ring leaves rank r's sum and where its
// allgather_in_place takes rank r's contribution from.
#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "zero_run.h"

namespace dtw::ch04 {

template <TrainElement T>
void reduce_scatter_grads(Comm& comm, const Sharding& sharding, train::Replica<T>& replica) {
  // @lab 04.1: Reduce-scatter each unit's gradient in place, leaving the sum of this rank's chunk in that chunk.
  // @hint 1: Every unit's gradient is summed over the ranks, but each rank keeps
  // @hint 1: only the sum of the chunk it owns (the chunk it will step); the rest
  // @hint 1: of the unit's buffer is scratch. Nothing is copied: the sum lands
  // @hint 1: where the chunk already is.
  // @hint 2: for u in units, in order: g = the unit's gradient; reduce-scatter g
  // @hint 2: summing, so that this rank's chunk of g (Sharding's chunks of u) ends
  // @hint 2: as the sum. Traps: a sum, not a maximum nor a mean (each row's
  // @hint 2: weight already makes the sum the batch mean); and a rank whose chunk
  // @hint 2: of a small unit is empty still takes part, or its neighbours wait.
  // @hint 3: grads = replica.grads(unit.begin, unit.end);
  // @hint 3: ch01::reduce_scatter(comm, grads, sharding.chunks(u).of(grads, comm.rank()),
  // @hint 3: ReduceOp::kSum) for u = 0 .. sharding.units().size() - 1.
  const int r = comm.rank();
  for (int u = 0; u < static_cast<int>(sharding.units().size()); ++u) {
    const model::Unit& unit = sharding.units()[static_cast<std::size_t>(u)];
    const std::span<T> grads = replica.grads(unit.begin, unit.end);
    ch01::reduce_scatter(comm, grads, sharding.chunks(u).of(grads, r), ReduceOp::kSum);
  }
  // @end
}

template <TrainElement T>
void allgather_params(Comm& comm, const Sharding& sharding, train::Replica<T>& replica) {
  // @lab 04.1: Allgather each unit's parameters in place, so every rank gets every rank's stepped chunk.
  // @hint 1: After the step each rank has fresh values in its own chunk of each
  // @hint 1: unit and stale ones elsewhere; every rank's chunk must reach every
  // @hint 1: rank, in place, unit by unit.
  // @hint 2: for each unit in order: allgather the unit's parameter span in place
  // @hint 2: (chunk r of the span is rank r's contribution). Trap: this must come
  // @hint 2: after the optimizer step, or it spreads the old values.
  // @hint 3: ch01::allgather_in_place(comm, replica.params(unit.begin, unit.end)).
  for (const model::Unit& unit : sharding.units())
    ch01::allgather_in_place(comm, replica.params(unit.begin, unit.end));
  // @end
}

template <class T>
void run_zero1(ZeroRun<T>& z) {
  const train::RunSpec& spec = z.spec();
  // Full parameters and gradients; optimizer state for this rank's shards only
  // (z.plan(), step 04.1).
  train::Replica<T> replica(spec, z.run().exec(), z.plan());
  replica.set_times(z.run().layer_times());
  // @lab 04.1: Train every step of the run the ZeRO-1 way, from z.start(replica) to spec.steps.
  // @hint 1: A step is: every micro-batch's forward and backward adding into the
  // @hint 1: full gradient, then the reduce-scatter, then the optimizer step of
  // @hint 1: this rank's shards only, then the allgather of the stepped chunks.
  // @hint 2: for step in [z.start(replica), spec.steps): loss = Σ_k micro-batch k;
  // @hint 2: reduce-scatter; end the step (clip, step, log, checkpoint); allgather.
  // @hint 2: Trap: nothing moves between micro-batches, and the allgather comes
  // @hint 2: after the step, never before it.
  // @hint 3: loss += z.micro_batch(replica, step, k) for k < z.options().micro_batches;
  // @hint 3: z.communicate("reduce-scatter", [&] { reduce_scatter_grads(z.comm(),
  // @hint 3: z.sharding(), replica); }); z.end_step(replica, step, loss);
  // @hint 3: z.communicate("allgather", [&] { allgather_params(...); }).
  for (std::int64_t step = z.start(replica); step < spec.steps; ++step) {
    double loss = 0;
    for (int k = 0; k < z.options().micro_batches; ++k) loss += z.micro_batch(replica, step, k);
    z.communicate("reduce-scatter", [&] { reduce_scatter_grads(z.comm(), z.sharding(), replica); });
    z.end_step(replica, step, loss);  // steps the shards only
    z.communicate("allgather", [&] { allgather_params(z.comm(), z.sharding(), replica); });
  }
  // @end
  z.finish(replica);
}

#define DTW_INSTANTIATE(T)                                                                 \
  template void reduce_scatter_grads<T>(Comm&, const Sharding&, train::Replica<T>&);      \
  template void allgather_params<T>(Comm&, const Sharding&, train::Replica<T>&);          \
  template void run_zero1<T>(ZeroRun<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch04
