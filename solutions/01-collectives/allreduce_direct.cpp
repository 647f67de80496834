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
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_direct(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const Chunks chunks(std::ssize(data), p);
  std::vector<Request> sends;
  sends.reserve(static_cast<std::size_t>(p));

  // @lab 01.10: Direct allreduce: each rank reduces its own chunk from everyone, then everyone gathers.
  // @hint 1: Isend chunk j to every rank j != r, recv_reduce chunk r from every other rank, wait
  // @hint 1: for the sends; then isend chunk r to every rank and receive chunk j from every rank j
  // @hint 1: (irecv + wait_all).
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
