// Step 01.3, linear gather: every rank contributes a block of m = in.size()
// elements; afterwards block i of the root's `out` (p·m elements, rank order,
// whatever the root) holds rank i's `in`. `out` is ignored on other ranks.
//
// Contract: same count, root and tag on every rank (dispatch.cpp has checked
// that the root's `out` holds p·m elements; p may be 1). The root's `in` may
// already be its own block of `out`. A block that arrives with another count
// than m is reported with expect_count, naming "gather". The root should not
// make a fast sender wait behind a slow one.
//
// Bytes on the wire: every non-root rank sends its m elements to the root
// once, (p-1)·m in all, all into the root's link; the root's own block moves
// by a local copy only. Cost (p-1)α + n(p-1)/p·β, n = p·m.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void gather_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = in.size();

  DTW_TODO("01.3: Gather to the root: block i of its output comes from rank i.");
}

#define DTW_INSTANTIATE(T) \
  template void gather_linear<T>(Comm&, std::span<const T>, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
