// Step 01.4, recursive-doubling allgather, in place: the same result as the
// ring (allgather_ring.cpp, shift 0) in ⌊lg p⌋ exchanges for a power-of-two p,
// and any p through the fold of the chapter text's "Non-powers of two".
// Four pieces, declared in algorithms.h:
// - Pof2Core(p, rank) and Pof2Core::real: the fold's numbers for one rank
//   (what each field means is in algorithms.h);
// - core_bounds_by_rank: where each core rank's part of `data` starts;
// - allgather_doubling_core: the power-of-two algorithm over the q core
//   ranks: core rank c starts with data[bounds[c], bounds[c+1]) and ends with
//   all of data[bounds[0], bounds[q]) (Rabenseifner, step 01.9, calls it with
//   bounds of its own);
// - allgather_recursive_doubling: any p, from the three above.
//
// Contract: as allgather_ring (same layout and tag everywhere, p >= 2, a
// count that differs is reported with expect_count). The core ranks'
// exchanges are between partners whose core numbers differ in one bit.
//
// Bytes on the wire: a core rank sends n(p-1)/p elements in all over ⌊lg p⌋
// messages (more for a core rank with a partner); a rank outside the core
// sends its chunk once and receives the whole result once. Cost lg p·α +
// n(p-1)/p·β, plus one message each way for the paired ranks.
#include "algorithms.h"

namespace dtw::ch01::detail {

Pof2Core::Pof2Core(int p, int rank) {
  DTW_TODO("01.4: Work out this rank's place in the power-of-two core.");
}

int Pof2Core::real(int c) const {
  DTW_TODO("01.4: The real rank of core rank c.");
}

std::vector<std::int64_t> core_bounds_by_rank(const Pof2Core& core, const Chunks& chunks) {
  DTW_TODO("01.4: Where each core rank's part of the data starts.");
}

template <class T>
void allgather_doubling_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                             std::span<const std::int64_t> bounds, int tag) {
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

  DTW_TODO("01.4: Fold the extra ranks in, run the core, fold the result out.");
}

#define DTW_INSTANTIATE(T)                                                           \
  template void allgather_recursive_doubling<T>(Comm&, std::span<T>, const Chunks&, int); \
  template void allgather_doubling_core<T>(Comm&, std::span<T>, const Pof2Core&,     \
                                           std::span<const std::int64_t>, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
