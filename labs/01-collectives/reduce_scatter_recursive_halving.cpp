// Step 01.5, recursive-halving reduce-scatter, in place: the same result as
// the ring (reduce_scatter_ring.cpp) in ⌊lg p⌋ exchanges for a power-of-two
// p, and any p through the fold of the chapter text's "Non-powers of two"
// (Pof2Core and core_bounds_by_rank, written in step 01.4). Two pieces:
// - reduce_scatter_halving_core: the power-of-two algorithm over the q core
//   ranks: afterwards core rank c holds, in data[bounds[c], bounds[c+1]), op
//   over that range of every core rank's data (Rabenseifner, step 01.9,
//   calls it with bounds of its own);
// - reduce_scatter_recursive_halving: any p; afterwards chunk r of rank r is
//   reduced over all p ranks, on every rank, paired or not.
//
// Contract: as reduce_scatter_ring (same layout, op and tag everywhere, p >= 2,
// op never kAvg, a count that differs ends in an error).
//
// Bytes on the wire: a core rank sends and reduces n(p-1)/p elements over
// ⌊lg p⌋ messages (the ring's bytes in fewer latencies); a rank outside the
// core sends its whole vector once and receives its reduced chunk once. Cost
// lg p·α + n(p-1)/p·(β + γ), plus those two messages for the pairs.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_halving_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                                 std::span<const std::int64_t> bounds, ReduceOp op, int tag) {
  const auto range = [&](int lo, int hi) {
    const auto begin = bounds[static_cast<std::size_t>(lo)],
               end = bounds[static_cast<std::size_t>(hi)];
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  DTW_TODO("01.5: Recursive halving on the power-of-two core: each round halves the range a rank keeps.");
}

template <class T>
void reduce_scatter_recursive_halving(Comm& comm, std::span<T> data, const Chunks& chunks,
                                      ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.5: Fold the extra ranks in, run the core, fold the result out.");
}

#define DTW_INSTANTIATE(T)                                                                         \
  template void reduce_scatter_recursive_halving<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int); \
  template void reduce_scatter_halving_core<T>(Comm&, std::span<T>, const Pof2Core&,               \
                                               std::span<const std::int64_t>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
