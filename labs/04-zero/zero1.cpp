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
  DTW_TODO("04.1: Reduce-scatter each unit's gradient in place, leaving the sum of this rank's chunk in that chunk.");
}

template <TrainElement T>
void allgather_params(Comm& comm, const Sharding& sharding, train::Replica<T>& replica) {
  DTW_TODO("04.1: Allgather each unit's parameters in place, so every rank gets every rank's stepped chunk.");
}

template <class T>
void run_zero1(ZeroRun<T>& z) {
  const train::RunSpec& spec = z.spec();
  // Full parameters and gradients; optimizer state for this rank's shards only
  // (z.plan(), step 04.1).
  train::Replica<T> replica(spec, z.run().exec(), z.plan());
  replica.set_times(z.run().layer_times());
  DTW_TODO("04.1: Train every step of the run the ZeRO-1 way, from z.start(replica) to spec.steps.");
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
