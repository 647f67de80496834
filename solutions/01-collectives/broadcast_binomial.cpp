// Step 01.1, binomial-tree broadcast: afterwards every rank's `data` holds the
// root's `data`, spread in ⌈lg p⌉ rounds: every rank that already has the
// message passes it on, so the number of ranks holding it doubles each round
// (the chapter text, "Algorithms and their costs"). Any rank may be the root.
//
// Contract: as broadcast_linear (same arguments on every rank, p >= 2 here; a
// received count other than data.size() is reported with expect_count,
// naming "broadcast binomial").
//
// Bytes on the wire: every rank but the root receives n elements exactly
// once, (p-1)·n in all; the root sends ⌈lg p⌉ messages, no rank more. Cost
// ⌈lg p⌉(α + nβ). The test counts the root's messages and every rank's
// receives.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void broadcast_binomial(Comm& comm, std::span<T> data, int root, int tag) {
  const int p = comm.size();
  if (p == 1) return;

  // @lab 01.1: Broadcast down a binomial tree rooted at `root`.
  // @hint 1: Draw the tree for root 0 first: in each round every rank that has the message sends
  // @hint 1: it to one that has not, at half the distance of the round before, so each rank is
  // @hint 1: told once and then tells a few others. Then renumber the ranks so that the root is
  // @hint 1: number 0 ("virtual ranks"), and the same tree serves every root.
  // @hint 2: v = (rank - root + p) % p, and the real rank of v is (v + root) % p. A rank v > 0
  // @hint 2: receives from v minus its lowest set bit; then (root included, whose "lowest bit" is
  // @hint 2: the first power of two >= p) it sends to v + m for m = that bit / 2, / 4, ..., 1, but
  // @hint 2: only while v + m < p. Trap: forgetting the bound or mapping back with the wrong sign
  // @hint 2: leaves a rank waiting for ever (root 0 hides the mapping bug).
  // @hint 3: mask = 1; while (mask < p) { if (v & mask) { got = comm.recv(data, real(v - mask),
  // @hint 3: tag); expect_count(...); break; } mask <<= 1; } then for (mask >>= 1; mask > 0; mask
  // @hint 3: >>= 1) if (v + mask < p) comm.send(data, real(v + mask), tag);
  // How this solution works (the lab shows none of it):
  // Binomial-tree broadcast: in round k every rank that already has the message
  // sends it to one that has not, so the number of informed ranks doubles each
  // round and ⌈lg p⌉ rounds suffice.
  //
  // The tree is drawn over virtual ranks v = (rank - root) mod p, so the root is
  // v = 0 whatever its real number. For p = 8:
  //
  //   round 1:  0 → 4
  //   round 2:  0 → 2,  4 → 6
  //   round 3:  0 → 1,  2 → 3,  4 → 5,  6 → 7
  //
  // A rank with virtual number v receives from v minus its lowest set bit, then
  // sends to v + 2^j for every 2^j below that bit (largest first, as long as
  // v + 2^j < p). The root, having no set bit, sends to every power of two < p.
  //
  // Cost: ⌈lg p⌉(α + nβ). Great for small messages (few latencies); for large
  // ones every round moves the whole message, so ranks wait while whole copies
  // go down the tree: scatter-allgather moves only 2n(p-1)/p per rank.
  //
  // Worked example, p = 6, root 2 (v = (r - 2) mod 6):
  //
  //   v:    0  1  2  3  4  5        real: 2  3  4  5  0  1
  //   round 1:  v0 → v4   (2 → 0)
  //   round 2:  v0 → v2   (2 → 4)     v4 has no child at distance 2 (v6 > p-1)
  //   round 3:  v0 → v1   (2 → 3),  v2 → v3 (4 → 5),  v4 → v5 (0 → 1)
  //
  // Bytes on the wire: every rank but the root receives n once; the root sends
  // ⌈lg p⌉ copies, inner nodes fewer. Total (p-1)·n, the minimum, but sent in
  // ⌈lg p⌉ rounds instead of from one link.
  //
  // Pitfall: blocking sends are fine here, because every child is already (or
  // soon) waiting in its receive and has nothing else to do first.
  //
  // Check yourself:
  // - How many rounds for p = 5? 3: ⌈lg 5⌉. Who is informed when? v4 in round
  //   1, v2 in round 2, v1 and v3 in round 3 (v4 has no children: v5 and v6
  //   are past the last rank).
  // - Why send to the largest subtree first? It has the most work left: giving
  //   it the message early lets its rounds overlap with ours.
  // - What does the root do after its last send? Nothing: it returns while its
  //   children may still be forwarding; a broadcast is not a barrier.
  //
  // Try it: in a trace of a binomial broadcast on 8 ranks, the informed ranks
  // double each round (1, 2, 4, 8), and the traffic table holds exactly p-1
  // cells of n elements: each rank receives once.
  // Virtual ranks: the root is 0 whatever its real number.
  const int v = (comm.rank() - root + p) % p;
  const auto real = [root, p](int vrank) { return (vrank + root) % p; };
  // Receive: find the lowest set bit of v; the parent is v without it.
  int mask = 1;
  while (mask < p) {
    if (v & mask) {
      const int parent = real(v - mask);
      const std::int64_t got = comm.recv(data, parent, tag);
      expect_count(comm, "broadcast binomial", parent, got, std::ssize(data));
      break;
    }
    mask <<= 1;
  }
  // Send: the children are v + 2^j for every 2^j below that bit. The biggest
  // subtree gets the message first, since it has the most rounds still to go.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < p) comm.send(data, real(v + mask), tag);
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void broadcast_binomial<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
