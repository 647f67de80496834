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
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void broadcast_binomial(Comm& comm, std::span<T> data, int root, int tag) {
  const int p = comm.size();
  if (p == 1) return;
  const int v = to_virtual(comm.rank(), root, p);

  DTW_TODO("01.1: Broadcast down a binomial tree rooted at `root`.");
}

#define DTW_INSTANTIATE(T) template void broadcast_binomial<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
