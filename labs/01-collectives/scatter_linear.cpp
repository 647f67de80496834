// Step 01.3, linear scatter: the root's `in` holds p blocks of m = out.size()
// elements; afterwards rank i's `out` holds block i. `in` is ignored on the
// other ranks (it may be empty there).
//
// Contract: same count, root and tag on every rank (dispatch.cpp has checked
// that the root's `in` holds p·m elements; p may be 1). A receiver that gets
// another count than m reports it with expect_count, naming "scatter". The
// root's `in` must stay untouched until every block has been delivered.
//
// Bytes on the wire: the root sends m elements to each other rank once,
// (p-1)·m in all, all through its link; its own block moves by a local copy.
// Cost (p-1)α + n(p-1)/p·β, n = p·m: gather, run backwards.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void scatter_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = out.size();

  DTW_TODO("01.3: Scatter from the root: block i of its input goes to rank i.");
}

#define DTW_INSTANTIATE(T) \
  template void scatter_linear<T>(Comm&, std::span<const T>, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
