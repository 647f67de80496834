// Step 01.2, binomial-tree reduce: afterwards the root's `data` holds op over
// every rank's `data`; the other ranks' `data` is scratch (they may keep
// partial results in it). The reductions are spread over a tree instead of
// all landing on the root: the broadcast's tree, run backwards.
//
// Contract: as reduce_linear (same arguments everywhere, p >= 2, op never
// kAvg, counts that differ end in an error). Every op here is commutative and
// associative, so regrouping is allowed; float results may differ from the
// linear order's in the last bits (the test allows for it).
//
// Bytes on the wire: every rank but the root sends n elements exactly once;
// the root receives ⌈lg p⌉ messages at most. Cost ⌈lg p⌉(α + nβ + nγ). The
// test counts every rank's sends and the root's receives, for several roots.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_binomial(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag) {
  const int p = comm.size();
  if (p == 1) return;

  DTW_TODO("01.2: Reduce up a binomial tree onto `root`.");
}

#define DTW_INSTANTIATE(T) template void reduce_binomial<T>(Comm&, std::span<T>, ReduceOp, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
