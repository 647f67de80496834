// Step 01.5, ring reduce-scatter, in place: `data` (n elements on every rank)
// is laid out as `chunks` (Chunks(n, p): chunk i belongs to rank i).
// Afterwards chunk r of rank r's `data` holds op over every rank's chunk r;
// the other chunks hold scratch (partial results).
//
// Contract: every rank calls with the same layout, op and tag (p >= 2, op
// never kAvg). Each rank talks only to its two neighbours on the ring, and
// sends only to the right one, r + 1 (mod p): the test checks it. A count
// that differs between ranks ends in an error (the fused receive-and-reduce
// checks its message's size). Empty chunks are still sent.
//
// Bytes on the wire: p-1 steps; in each, every rank sends one chunk right and
// receives one from the left, reducing it into its own copy: n(p-1)/p
// elements sent and reduced per rank. Cost (p-1)α + n(p-1)/p·(β + γ). No
// step may deadlock, whatever p.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_ring(Comm& comm, std::span<T> data, const Chunks& chunks, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.5: Reduce-scatter around the ring: p-1 steps, one chunk each.");
}

#define DTW_INSTANTIATE(T) \
  template void reduce_scatter_ring<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
