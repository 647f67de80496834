// Step 01.7, naive allreduce, in place: afterwards every rank's `data` holds op
// over every rank's `data`. The parameter-server pattern: one rank, rank 0
// here, plays the server that every other rank talks to (DP 1.0 in chapter
// 02, a central server in chapter 03). Build it from what you wrote in 01.1
// and 01.2.
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg).
//
// Bytes on the wire: every other rank sends n elements to the server and
// receives n from it; the server's link carries (p-1)·n in each direction,
// which the test checks. Cost 2(p-1)(α + nβ) + (p-1)nγ.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_naive(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  if (comm.size() == 1) return;
  // Rank 0 plays the server.
  constexpr int kServer = 0;
  DTW_TODO("01.7: Allreduce through a central rank: reduce onto it, then broadcast.");
}

#define DTW_INSTANTIATE(T) template void allreduce_naive<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
