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
  // @lab 01.7: Allreduce through a central rank: reduce onto it, then broadcast.
  // @hint 1: Two phases through the server: everyone's vectors flow into it and are combined
  // @hint 1: there, then the result flows back out to everyone, each time straight between the
  // @hint 1: server and each rank (no tree: the server's link is the whole story).
  // @hint 2: Phase 1: the linear reduce onto kServer with op. Phase 2: the linear broadcast from
  // @hint 2: kServer. Traps: without phase 2 only the server has the result; reducing with a
  // @hint 2: fixed sum instead of op is right for sums only.
  // @hint 3: reduce_linear(comm, data, op, kServer, tag); broadcast_linear(comm, data, kServer,
  // @hint 3: tag);
  // How this solution works (the lab shows none of it):
  // Naive allreduce: every rank sends its vector to rank 0, rank 0 adds them
  // all up and sends the result back to everyone. This is the parameter-server
  // pattern (DP 1.0 in chapter 02, a central server in chapter 03): simple, and
  // the server's network link is the whole story.
  //
  //   phase 1 (linear reduce):     1..p-1 ──► 0     rank 0 receives (p-1)n
  //   phase 2 (linear broadcast):  0 ──► 1..p-1     rank 0 sends    (p-1)n
  //
  // Cost: 2(p-1)(α + nβ) + (p-1)nγ. Every other rank sends n and receives n, but
  // rank 0's link carries (p-1)n in each direction: doubling the ranks doubles
  // the time, while the ring's per-rank bytes stay near 2n. That one congested
  // link is why allreduce moved from servers to rings and trees.
  //
  // Worked example, p = 4, each rank holding n = 3 values:
  //
  //   rank:        0          1          2          3
  //   before:   [1 1 1]    [2 2 2]    [3 3 3]    [4 4 4]
  //   phase 1:  rank 0 receives 1's, 2's and 3's vectors in turn and adds each
  //             into its own:  [1 1 1] → [3 3 3] → [6 6 6] → [10 10 10]
  //   phase 2:  rank 0 sends [10 10 10] to 1, 2 and 3
  //   after:   [10 10 10] on every rank
  //
  // Bytes on the wire, per rank (n elements of b bytes each):
  //
  //   rank 0 (server):  receives (p-1)·n·b, sends (p-1)·n·b
  //   every other rank: sends n·b, receives n·b
  //
  // With p = 8 and a 100 MB gradient the server's link moves 700 MB each way,
  // while a ring allreduce moves 2·(7/8)·100 = 175 MB per rank. The server also
  // does all (p-1)·n additions alone while the other ranks sit idle. Run
  // `dtw run allreduce-algorithms` and look at the traffic table: rank 0's row
  // and column are the only busy ones.
  //
  // Where you still meet it: a parameter server (chapter 03) is exactly this
  // pattern, with the server also applying the optimizer step; it is easy to
  // shard (several servers, each owning a slice of the parameters), and
  // sharding it p ways turns it into the direct allreduce (allreduce_direct.cpp).
  //
  // Pitfall: both phases reuse the building blocks of steps 01.1 and 01.2 with
  // root 0. Do not write new message loops here; composing tested pieces is the
  // point, and it is how MPI libraries build their simplest allreduce too.
  //
  // Check yourself:
  // - How does the time change from p = 4 to p = 8 for a fixed n? It roughly
  //   doubles: the server's link carries (p-1)·n each way.
  // - How long does rank p-1 wait in phase 1? Until the server has taken the
  //   messages of ranks 1 .. p-2: blocking sends are synchronous, so the last
  //   rank in line waits the longest. Look at the trace (`--trace`).
  // - What would help more: a faster server or more servers? More servers, each
  //   owning 1/k of the vector: that is the sharded parameter server, and with
  //   k = p it is allreduce_direct.cpp.
  // - Does the result depend on the order of arrival? No: the linear reduce
  //   adds in rank order, so even float sums are the same on every run.
  //
  // Try it: `dtw run allreduce-algorithms --ranks 8 --trace naive.json` and open
  // the trace in Perfetto: during the naive allreduce, rank 0's track is one
  // long row of receives and then sends, while the other tracks wait. The same
  // trace shows the ring's tracks all busy at once.
  //
  // Cost check for p = 8, n = 1 MiB: 2·7 = 14 messages through rank 0, 7 MiB in
  // and 7 MiB out; the ring needs 14 steps too, but of 128 KiB each.
  reduce_linear(comm, data, op, kServer, tag);
  broadcast_linear(comm, data, kServer, tag);
  // @end
}

#define DTW_INSTANTIATE(T) template void allreduce_naive<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
