// Step 01.7, binomial allreduce, in place: afterwards every rank's `data`
// holds op over every rank's `data`, by the same two phases as the naive
// version, each in ⌈lg p⌉ rounds instead of p-1 messages through one link.
// Build it from what you wrote in 01.1 and 01.2.
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg).
// Every rank ends with the same bits (the test compares each with rank 0).
//
// Bytes on the wire: the whole vector moves in every round of both phases;
// cost 2⌈lg p⌉α + 2⌈lg p⌉nβ + ⌈lg p⌉nγ.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_binomial(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  if (comm.size() == 1) return;
  constexpr int kRoot = 0;
  DTW_TODO("01.7: Allreduce as a tree reduce followed by a tree broadcast.");
}

#define DTW_INSTANTIATE(T) template void allreduce_binomial<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
