// Step 01.2, binomial-tree reduce: afterwards the root's `data` holds op over
// every rank's `data`; the other ranks' `data` is scratch (they may keep
// partial results in it). The reductions are spread over a tree instead of
// all landing on the root: the broadcast's tree, run backwards.
//
// Contract: as reduce_linear (same arguments everywhere, p >= 2, op never
// kAvg, counts that differ end in an error). Every op here is commutative and
// associative, so regrouping is allowed; float results may differ from the
// linear order's in the last bits (the test allows for it).
//
// Bytes on the wire: every rank but the root sends n elements exactly once;
// the root receives ⌈lg p⌉ messages at most. Cost ⌈lg p⌉(α + nβ + nγ). The
// test counts every rank's sends and the root's receives, for several roots.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_binomial(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag) {
  const int p = comm.size();
  if (p == 1) return;

  // @lab 01.2: Reduce up a binomial tree onto `root`.
  // @hint 1: Run the broadcast's tree backwards: a rank first collects the partial results of its
  // @hint 1: whole subtree, folding each into its own vector, and only then passes the sum up to
  // @hint 1: its parent, once. Work in virtual ranks, so that the root is number 0.
  // @hint 2: v = (rank - root + p) % p. For mask = 1, 2, 4, ... while mask < p: if v has the bit
  // @hint 2: mask, send data to v - mask and stop; otherwise, if v + mask < p, combine the
  // @hint 2: message of v + mask into data. Trap: a rank that keeps going after its send waits
  // @hint 2: for children it does not have; a wrong mapping back to real ranks only shows for a
  // @hint 2: root other than 0.
  // @hint 3: comm.send(data, (v - mask + root) % p, tag); return; and comm.recv_reduce(data,
  // @hint 3: (v + mask + root) % p, op, tag).
  // How this solution works (the lab shows none of it):
  // Binomial-tree reduce: the broadcast tree run backwards. In round k every
  // rank whose virtual number has bit k set sends its partial result to the rank
  // without that bit, which folds it in; after ⌈lg p⌉ rounds the root (virtual
  // rank 0) holds the reduction of everything. For p = 8:
  //
  //   round 1:  1 → 0,  3 → 2,  5 → 4,  7 → 6
  //   round 2:  2 → 0,  6 → 4
  //   round 3:  4 → 0
  //
  // Cost: ⌈lg p⌉(α + nβ + nγ). The reductions are spread over the tree instead of
  // all landing on the root, but each round still moves and adds the whole
  // vector: for large n, Rabenseifner's reduce-scatter + gather is cheaper.
  //
  // Reordering the additions is allowed because every dtw op is commutative
  // and associative (for floats up to rounding: results may differ from the
  // linear order by a few ulps).
  //
  // Worked example, p = 5, root 3 (virtual rank v = (r - 3) mod 5):
  //
  //   real rank:     3   4   0   1   2
  //   virtual rank:  0   1   2   3   4
  //   round 1:  v1 → v0 (4 → 3),  v3 → v2 (1 → 0)       v4 has no partner yet
  //   round 2:  v2 → v0 (0 → 3)                          v4 waits
  //   round 3:  v4 → v0 (2 → 3)
  //   root 3 now holds the reduction over all five ranks.
  //
  // Bytes on the wire: every non-root rank sends n once; a rank receives n from
  // each of its children; the root receives ⌈lg p⌉ vectors at most. Total
  // (p-1)·n, the same as the linear reduce, but spread over many links and
  // overlapped in time: ⌈lg p⌉ rounds instead of p-1.
  //
  // Pitfall: a rank must receive from all its children before sending to its
  // parent; the loop order (low masks first) guarantees it, because a child
  // v + mask is always sent to in a round before v's own send.
  //
  // Check yourself:
  // - For p = 8, which ranks does the root receive from? Virtual ranks 1, 2, 4:
  //   one per round, each carrying its whole subtree's partial result.
  // - How many additions does the root perform? ⌈lg p⌉·n, against (p-1)·n in
  //   the linear reduce: the other additions happened in parallel elsewhere.
  // - Why may the non-root ranks' data change? They accumulate their subtree's
  //   partial results in place; copying first would cost a pass over memory.
  // - Is the float result the same as the linear reduce's? Not always: the
  //   additions are grouped differently, so results may differ in the last bits
  //   (the tests allow a tolerance that grows with lg p for that reason).
  // - Are all five ops safe to regroup? Sum, prod, min, max: yes (commutative
  //   and associative). A non-commutative op would need the order kept.
  //
  // Try it: in the traffic table of a binomial reduce with root 0 and p = 8,
  // rank 0's column has three entries (from 1, 2 and 4) and rank 7's row has
  // one (to 6): each rank sends exactly once, to the rank without its lowest bit.
  // With root 3 the same picture appears, rotated by 3.
  const int v = (comm.rank() - root + p) % p;
  const auto real = [root, p](int vrank) { return (vrank + root) % p; };
  for (int mask = 1; mask < p; mask <<= 1) {
    if (v & mask) {
      // Our subtree is complete: hand its partial result to the parent, done.
      comm.send(data, real(v - mask), tag);
      return;
    }
    // Fold in the subtree rooted at v + mask, if it exists.
    if (v + mask < p) comm.recv_reduce(data, real(v + mask), op, tag);
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void reduce_binomial<T>(Comm&, std::span<T>, ReduceOp, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
