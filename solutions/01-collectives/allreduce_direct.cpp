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

  // @lab 01.10: Direct allreduce: each rank reduces its own chunk from everyone, then everyone gathers.
  // @hint 1: Two phases, each an exchange with every other rank at once. First every rank gives
  // @hint 1: each owner its copy of the owner's chunk and combines the copies it receives into its
  // @hint 1: own chunk; then every owner gives its finished chunk to everyone, who puts it in
  // @hint 1: place. Only the owner's chunk is ever combined into.
  // @hint 2: Phase 1: start a send of chunk j to every j != r; combine the message of every other
  // @hint 2: rank into chunk r (in the order r-1, r-2, ... so no rank is everyone's first stop);
  // @hint 2: wait for the sends. Phase 2: start a receive of chunk src from every src != r and a
  // @hint 2: send of chunk r to everyone; wait; check each count against chunk src's size. Traps:
  // @hint 2: sending chunk r in phase 1; a plain receive in phase 1; receiving phase 2's chunks
  // @hint 2: into chunk r; checking against your own chunk's size (chunks differ by one).
  // @hint 3: comm.isend(chunks.of(data, dst), dst, tag); comm.recv_reduce(chunks.of(data, r),
  // @hint 3: (r - k + p) % p, op, tag); comm.wait_all(sends); comm.irecv(chunks.of(data, src),
  // @hint 3: src, tag); comm.isend(chunks.of(data, r), (r + k) % p, tag); comm.wait_all(...);
  // @hint 3: expect_count(comm, "allreduce direct", src, recvs[k-1].received_count(),
  // @hint 3: chunks.size(src)).
  // How this solution works (the lab shows none of it):
  // Direct allreduce ("parallel reduce"): rank r owns chunk r of the result. Every
  // rank sends chunk j straight to rank j and reduces into its own chunk the p-1
  // copies it receives; then every rank sends its reduced chunk straight to all
  // others. No forwarding: each piece of data travels one hop.
  //
  //   phase 1 (reduce-scatter): rank r sends p-1 chunks out, receives p-1 in
  //   phase 2 (allgather):      the same, with the reduced chunks
  //
  // Cost: 2(p-1)α + 2n(p-1)/p·β + n(p-1)/p·γ: the ring's bytes, but all p-1
  // messages of a phase are in flight at once, so on a full crossbar (NVSwitch,
  // or threads sharing memory) it takes 2 rounds instead of 2(p-1). On a ring or
  // a tree-shaped network the messages share links and it loses its edge, and
  // each rank needs p-1 connections.
  //
  // Worked example, p = 3, n = 3, ranks holding a, b, c:
  //
  //   phase 1: rank 0 sends a1 to 1 and a2 to 2, and adds b0 and c0 into a0;
  //            likewise rank 1 ends with a1+b1+c1 and rank 2 with a2+b2+c2.
  //   phase 2: every rank sends its finished element to the two others.
  //
  // Bytes on the wire, per rank: (p-1) chunks out and in per phase.
  //
  // Check yourself:
  // - How many messages does each rank send? 2(p-1), all of them posted at once
  //   per phase. With p = 1024 that is 2046 outstanding sends per rank: the
  //   reason direct exchange is kept for small groups (one node, one switch).
  // - What does chunk r hold after phase 1, and the other chunks? Chunk r holds
  //   the full result; the others still hold this rank's own inputs, which
  //   phase 2 overwrites with the other ranks' results.
  //
  // Try it: its traffic table is full, every cell 2n/p: all links in use.
  std::vector<Request> sends;
  sends.reserve(static_cast<std::size_t>(p));
  // Phase 1: post all p-1 sends first, so every peer can read while we reduce.
  // Chunk r is never sent, so adding into it cannot race with a send.
  for (int k = 1; k < p; ++k) {
    const int dst = (r + k) % p;
    sends.push_back(comm.isend(chunks.of(data, dst), dst, tag));
  }
  // Take the messages in the order they were posted: rank r-k sent to us as
  // its k-th send. In each round k every rank reads from a different peer, so
  // no rank's memory is everybody's first stop.
  for (int k = 1; k < p; ++k)
    comm.recv_reduce(chunks.of(data, r), (r - k + p) % p, op, tag);
  comm.wait_all(sends);
  sends.clear();

  // Phase 2: our chunk is final; send it to everyone, collect everyone's.
  std::vector<Request> recvs;
  recvs.reserve(static_cast<std::size_t>(p));
  for (int k = 1; k < p; ++k) {
    const int src = (r - k + p) % p;
    recvs.push_back(comm.irecv(chunks.of(data, src), src, tag));
    sends.push_back(comm.isend(chunks.of(data, r), (r + k) % p, tag));
  }
  comm.wait_all(recvs);
  comm.wait_all(sends);
  for (int k = 1; k < p; ++k) {
    const int src = (r - k + p) % p;
    expect_count(comm, "allreduce direct", src,
                 recvs[static_cast<std::size_t>(k - 1)].received_count(), chunks.size(src));
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void allreduce_direct<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
