// Step 01.8, ring allreduce, in place: afterwards every rank's `data` holds op
// over every rank's `data`, with each rank sending only 2n(p-1)/p elements,
// only to its right neighbour: the bandwidth-optimal allreduce behind NCCL's
// and Horovod's (the chapter text, "Algorithms and their costs"). Build it
// from the two ring collectives you wrote in 01.4 and 01.5, over the chunk
// layout Chunks(n, p).
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg).
// Every rank ends with the same bits (the test compares each with rank 0).
//
// Bytes on the wire: 2(p-1) messages of about n/p elements per rank, all to
// r + 1; the test checks that the ring carries 2(p-1)·n elements in all and
// nothing else. Cost 2(p-1)α + 2n(p-1)/p·β + n(p-1)/p·γ.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_ring(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  const int p = comm.size();
  if (p == 1) return;

  DTW_TODO("01.8: Ring allreduce from two ring collectives you have written.");
}

#define DTW_INSTANTIATE(T) template void allreduce_ring<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
