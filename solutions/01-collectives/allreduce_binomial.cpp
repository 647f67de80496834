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
  // @lab 01.7: Allreduce as a tree reduce followed by a tree broadcast.
  // @hint 1: Combine everything up a tree onto one rank, then send that rank's result down the
  // @hint 1: same kind of tree to everyone. Both phases must agree on which rank is the top.
  // @hint 2: Phase 1: the binomial reduce onto kRoot. Phase 2: the binomial broadcast from kRoot.
  // @hint 2: Traps: broadcasting first spreads unreduced data; broadcasting from another rank than
  // @hint 2: the one the reduce ended on spreads a partial result.
  // @hint 3: reduce_binomial(comm, data, op, kRoot, tag); broadcast_binomial(comm, data, kRoot,
  // @hint 3: tag);
  // How this solution works (the lab shows none of it):
  // Binomial-tree allreduce: a binomial-tree reduce onto rank 0, then a
  // binomial-tree broadcast of the result. The same two phases as the naive
  // version, but each takes ⌈lg p⌉ rounds instead of p-1 sends through one link.
  //
  //   phase 1: reduce up the tree     ⌈lg p⌉(α + nβ + nγ)
  //   phase 2: broadcast down it      ⌈lg p⌉(α + nβ)
  //
  // Cost: 2⌈lg p⌉α + 2⌈lg p⌉nβ + ⌈lg p⌉nγ. The latency term is small, which is
  // why trees serve small messages well; but each round moves the whole vector,
  // so for large n the β term is lg p times the ring's 2n(p-1)/p.
  // Rank 0 sends and receives the whole vector ⌈lg p⌉ times: less than the
  // naive server's (p-1) times, more than the ring's two.
  //
  // Worked example, p = 6 (not a power of two), virtual ranks = real ranks:
  //
  //   reduce, round 1:  1 → 0,  3 → 2,  5 → 4         (mask 1)
  //   reduce, round 2:  2 → 0                          (mask 2; v4 + 2 = 6 is no rank)
  //   reduce, round 3:  4 → 0                          (mask 4)
  //   broadcast, round 1:  0 → 4
  //   broadcast, round 2:  0 → 2                       (4 + 2 = 6 is not a rank)
  //   broadcast, round 3:  0 → 1,  2 → 3,  4 → 5
  //
  // Six rounds of whole-vector messages for six ranks; a naive server would
  // need five receives and five sends, all through one link. The tree's
  // advantage grows with p: at p = 64 it is 12 rounds against 126 messages.
  //
  // Bytes on the wire, per rank: a leaf (odd rank) sends n and receives n; an
  // inner node receives one vector per child and sends one up, then the reverse;
  // rank 0 receives and sends ⌈lg p⌉·n. Every level of the tree moves the
  // whole vector, which is where the lg p factor in the β term comes from.
  //
  // When to pick it: small messages (a loss value, a norm, a flag), where 2 lg p
  // latencies beat the ring's 2(p-1). For vectors larger than a few kilobytes per
  // rank the ring or Rabenseifner move fewer bytes and win.
  //
  // Note that the reduce phase leaves partial sums in the non-root ranks' data;
  // the broadcast phase overwrites them, so every rank ends with the full result.
  //
  // Bytes for p = 8 and n = 1 MiB, to compare with the other allreduces:
  //
  //   algorithm     messages on rank 0   bytes through rank 0's link (each way)
  //   naive         14                   7 MiB
  //   binomial      6                    3 MiB
  //   ring          14                   1.75 MiB
  //   rabenseifner  6                    1.75 MiB
  //
  // Rabenseifner has the tree's message count and the ring's bytes: it is the
  // one to beat on both ends, except that its non-power-of-two handling costs
  // extra steps (see allreduce_rabenseifner.cpp).
  //
  // Check yourself:
  // - Why root 0 and not another root? Any root works; 0 keeps the virtual and
  //   real ranks equal, which makes traces easier to read.
  // - Which ranks are idle in the last reduce round? All but rank 0 and its
  //   last child: the tree narrows as it goes up, so most of the machine waits.
  //   The ring keeps every rank busy in every step.
  //
  // Try it: `dtw run allreduce-algorithms --ranks 6` prints each algorithm's
  // time for 100 003 int64 (800 KB) per rank. On the threads backend a message
  // is a memory copy and six rank threads share the cores, so the model's
  // ranking shows only roughly; `dtw bench collectives` sweeps the sizes.
  reduce_binomial(comm, data, op, kRoot, tag);
  broadcast_binomial(comm, data, kRoot, tag);
  // @end
}

#define DTW_INSTANTIATE(T) template void allreduce_binomial<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
