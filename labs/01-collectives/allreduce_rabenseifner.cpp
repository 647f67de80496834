// Step 01.9, Rabenseifner's allreduce, in place: afterwards every rank's
// `data` holds op over every rank's `data`, moving the ring's bytes in about
// 2 lg p steps instead of 2(p-1): a recursive-halving reduce-scatter followed
// by a recursive-doubling allgather (the chapter text, "Algorithms and their
// costs" and "Non-powers of two"). Build it from the power-of-two cores of
// 01.4 and 01.5 (allgather_doubling_core, reduce_scatter_halving_core) and
// Pof2Core; here the core cuts the vector into q nearly equal pieces,
// Chunks(n, q), one per core rank.
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg);
// every rank, in the core or not, ends with the same bits (the test compares
// each with rank 0). A count that differs ends in an error; a fold-out
// receive checks its count with expect_count.
//
// Bytes on the wire, p a power of two: each rank sends n(p-1)/p elements in
// each phase, in lg p messages each, only to partners r XOR 2^k (the test
// checks the bytes, the messages and the partners for p = 2, 4, 8). Cost
// 2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ; for other p, the paired ranks pay one
// more vector each way.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_rabenseifner(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.9: Rabenseifner: fold to a power of two, halving then doubling, fold out.");
}

#define DTW_INSTANTIATE(T) template void allreduce_rabenseifner<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
