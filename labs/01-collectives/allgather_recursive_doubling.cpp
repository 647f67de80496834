// Recursive-doubling allgather: in step k rank j swaps everything it has with
// rank j XOR 2^k. What each rank holds doubles every step: after lg p steps it
// has all p blocks. For p = 8, rank 0 holds:
//
//   start:  [0]      step 1 (⇄ 1):  [0,1]      step 2 (⇄ 2):  [0..3]
//   step 3 (⇄ 4):  [0..7]
//
// Cost: lg p·α + n(p-1)/p·β. The same bytes as the ring in only lg p
// latencies: the choice for small and medium messages (MPICH uses it below
// 512 KiB). Its weakness: partners 2^k apart are far apart in a real network.
//
// Any p (Pof2Core in algorithms.h): with q = 2^⌊lg p⌋ and e = p - q, the odd
// rank of each of the first e pairs (0,1), (2,3), ... hands its block to its
// even partner and sits out; the q remaining "core" ranks run the doubling,
// core rank c owning the blocks of the real ranks it stands for (two for a
// pair, one otherwise: consecutive blocks, so still one range); at the end each
// even rank hands the full result to its odd partner. Two extra messages for
// the paired ranks, still ⌊lg p⌋ + 2 steps.
#include "algorithms.h"

namespace dtw::ch01::detail {

std::vector<std::int64_t> core_bounds_by_rank(const Pof2Core& core, const Chunks& chunks) {
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(core.q) + 1);
  for (int c = 0; c < core.q; ++c)
    bounds[static_cast<std::size_t>(c)] = chunks.offset(core.real(c));
  bounds[static_cast<std::size_t>(core.q)] = chunks.total();
  return bounds;
}

template <class T>
void allgather_doubling_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                             std::span<const std::int64_t> bounds, int tag) {
  const int c = core.core_rank;
  // Data of core ranks [lo, hi) as a span.
  const auto range = [&](int lo, int hi) {
    const auto begin = bounds[static_cast<std::size_t>(lo)],
               end = bounds[static_cast<std::size_t>(hi)];
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  DTW_TODO("01.4: Recursive doubling on the power-of-two core: each round doubles the range a rank holds.");
}

template <class T>
void allgather_recursive_doubling(Comm& comm, std::span<T> data, const Chunks& chunks, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const Pof2Core core(p, r);
  const std::vector<std::int64_t> bounds = core_bounds_by_rank(core, chunks);

  DTW_TODO("01.4: Fold the extra ranks in, run the core, fold the result out.");
}

#define DTW_INSTANTIATE(T)                                                           \
  template void allgather_recursive_doubling<T>(Comm&, std::span<T>, const Chunks&, int); \
  template void allgather_doubling_core<T>(Comm&, std::span<T>, const Pof2Core&,     \
                                           std::span<const std::int64_t>, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
