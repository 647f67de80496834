// Step 01.10, direct allreduce ("parallel reduce"), in place: afterwards every
// rank's `data` holds op over every rank's `data`. Rank r owns chunk r of the
// result (Chunks(n, p)): it alone computes it, from every rank's copy of that
// chunk, and then every rank gets every owner's finished chunk. No forwarding:
// each piece of data travels one hop, and all messages of a phase are in
// flight at once (the chapter text, "Algorithms and their costs").
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg);
// every rank ends with the same bits. A finished chunk that arrives with
// another count than that chunk's size is reported with expect_count, naming
// "allreduce direct"; a count that differs ends in an error, never a hang.
//
// Bytes on the wire: every rank sends about n/p elements to every other rank
// in each of two phases, 2(p-1)·n elements in all (the test checks the total
// and that every pair exchanges at least a chunk). Cost 2(p-1)α +
// 2n(p-1)/p·β + n(p-1)/p·γ, in 2 rounds where the links allow.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_direct(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const Chunks chunks(std::ssize(data), p);

  DTW_TODO("01.10: Direct allreduce: each rank reduces its own chunk from everyone, then everyone gathers.");
}

#define DTW_INSTANTIATE(T) template void allreduce_direct<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
