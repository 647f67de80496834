// Step 01.2, linear reduce: afterwards the root's `data` holds op over every
// rank's `data`, element by element; the other ranks' `data` is scratch.
//
// Contract: every rank calls with the same count, op, root and tag (p >= 2
// here; op is never kAvg: dispatch.cpp sums and divides). The root's own
// values are one of the operands. A message of another count than data.size()
// must end in an error, never in a wrong sum. For floats the root must combine
// the ranks in the same order on every run (rank order), so that two runs give
// the same bits.
//
// Bytes on the wire: every non-root rank sends its n elements to the root
// once; the root receives (p-1)·n and does all (p-1)·n reductions itself.
// Cost (p-1)(α + nβ + nγ).
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_linear(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.2: Reduce onto the root, one rank after the other.");
}

#define DTW_INSTANTIATE(T) template void reduce_linear<T>(Comm&, std::span<T>, ReduceOp, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
