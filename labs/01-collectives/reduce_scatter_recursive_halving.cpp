// Recursive-halving reduce-scatter: in the first step rank j keeps one half of
// the vector, sends the other half to rank j XOR p/2 and adds the half it
// receives into the half it kept. Each following step halves again with a
// partner at half the distance. After lg p steps each rank holds one fully
// reduced p-th. For p = 4, rank 0 (blocks 0..3):
//
//   step 1 (⇄ 2): keep [0,1], send [2,3], add 2's [0,1]
//   step 2 (⇄ 1): keep [0],   send [1],   add 1's [0]     → block 0 done
//
// Cost: lg p·α + n(p-1)/p·β + n(p-1)/p·γ: the ring's bytes and reductions in
// lg p latencies. It is the first half of Rabenseifner's allreduce.
//
// Any p, the standard way (Pof2Core in algorithms.h): with q = 2^⌊lg p⌋ and
// e = p - q, the odd rank of each of the first e pairs (0,1), (2,3), ... sends
// its whole vector to its even partner, which adds it in; the odd rank then
// sits out. The q core ranks halve over blocks laid out by real rank (a pair's
// core rank owns both of its chunks), and at the end each even rank sends its
// odd partner that partner's reduced chunk. The pairs pay n more elements
// sent and reduced: a cost of non-powers of two.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_halving_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                                 std::span<const std::int64_t> bounds, ReduceOp op, int tag) {
  const int c = core.core_rank;
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
  const Pof2Core core(p, r);
  const std::vector<std::int64_t> bounds = core_bounds_by_rank(core, chunks);

  DTW_TODO("01.5: Fold the extra ranks in, run the core, fold the result out.");
}

#define DTW_INSTANTIATE(T)                                                                         \
  template void reduce_scatter_recursive_halving<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int); \
  template void reduce_scatter_halving_core<T>(Comm&, std::span<T>, const Pof2Core&,               \
                                               std::span<const std::int64_t>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
