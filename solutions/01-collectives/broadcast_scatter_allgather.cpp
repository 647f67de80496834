// Step 01.6, scatter-allgather broadcast (van de Geijn): afterwards every
// rank's `data` holds the root's `data`, as for 01.1, but with about 2n
// elements through each rank's link instead of whole copies down a tree: the
// root's message is cut into p chunks (Chunks(n, p)), each rank first gets
// one chunk, then every rank gets the rest from the others (the chapter text,
// "Algorithms and their costs"). Reuse your allgather_ring of step 01.4: its
// `shift` argument says which chunk each rank starts with.
//
// Contract: as broadcast_linear (same count, root and tag everywhere, p >= 2,
// a received count that differs is reported with expect_count, naming
// "broadcast scatter").
//
// Bytes on the wire: the scatter takes ⌈lg p⌉ rounds and the root sends
// n(p-1)/p elements in it; the allgather sends n(p-1)/p per rank. Cost
// (lg p + p-1)α + 2n(p-1)/p·β. The test requires that the root sends less
// than 2n elements in all.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void broadcast_scatter_allgather(Comm& comm, std::span<T> data, int root, int tag) {
  const int p = comm.size();
  if (p == 1) return;
  const Chunks chunks(std::ssize(data), p);

  // @lab 01.6: Broadcast as a binomial-tree scatter of the chunks, then a ring allgather.
  // @hint 1: First a scatter down the binomial tree of 01.1, over virtual ranks: instead of the
  // @hint 1: whole message, a parent hands each child only the chunks its subtree needs, which
  // @hint 1: are next to each other; afterwards each rank holds the chunk of its virtual rank.
  // @hint 1: Then the ring allgather passes those chunks around.
  // @hint 2: v = (rank - root + p) % p. As in 01.1, receive from v - lowbit, but only chunks [v,
  // @hint 2: v + lowbit); send child v + m the chunks [v + m, v + 2m), clipped at p. Then
  // @hint 2: allgather with shift root (rank r holds chunk r - root). Traps: chunk p does not
  // @hint 2: exist: a range ending at p ends at n; a shift of 0 is right only for root 0.
  // @hint 3: A range(lo, hi) span from chunks.offset(lo) to hi >= p ? chunks.total() :
  // @hint 3: chunks.offset(hi); comm.recv(range(v, v + mask), parent, tag) + expect_count(comm,
  // @hint 3: "broadcast scatter", ...); comm.send(range(v + mask, v + 2 * mask), child, tag);
  // @hint 3: allgather_ring(comm, data, chunks, tag, root).
  // How this solution works (the lab shows none of it):
  // Scatter-allgather broadcast (van de Geijn): cut the message into p chunks,
  // scatter them from the root down a binomial tree so that each rank gets one
  // chunk, then run a ring allgather so that everyone gets all chunks.
  //
  // The scatter uses virtual ranks v = (rank - root) mod p and gives chunk v to
  // virtual rank v. In the binomial tree a subtree covers consecutive virtual
  // ranks, so the chunks for a whole subtree are one contiguous range: a parent
  // sends child v+m the chunks [v+m, v+2m), which the child keeps passing down.
  //
  // Cost: scatter ⌈lg p⌉α + n(p-1)/p·β, allgather (p-1)α + n(p-1)/p·β, in all
  // (lg p + p-1)α + 2n(p-1)/p·β. For large n this beats the binomial tree's
  // lg p·nβ as soon as p > 2: every rank moves about 2n bytes, whatever p is.
  //
  // Worked example, p = 4, root 0, n = 8 (chunks of 2):
  //
  //   scatter:   0 sends chunks [2,4) to 2; then 0 sends chunk 1 to 1 and 2 sends
  //              chunk 3 to 3. Each rank now holds one chunk (0: c0, 1: c1, ...).
  //   allgather: 3 ring steps of one chunk each; everyone ends with c0..c3.
  //
  // Bytes on the wire, per rank: the root sends n(p-1)/p in the scatter; every
  // rank sends n(p-1)/p in the allgather. For 64 MiB on 8 ranks: the binomial
  // tree moves 64 MiB three times on the root's link; this moves 2·56 MiB spread
  // over all links at once.
  //
  // Pitfall: chunk p does not exist; "the end of chunk p-1" is n, so a range
  // [lo, hi) with hi = p must end at chunks.total(), not chunks.offset(p), which
  // wraps around to 0.
  //
  // Check yourself:
  // - For which n does it lose to the binomial tree? Small n, where its
  //   lg p + p - 1 latencies dominate the saved bytes.
  // - Why does the allgather need `shift = root`? Rank r holds chunk r - root
  //   after the scatter, not chunk r.
  //
  // Try it: its traffic table shows the scatter tree plus the ring's diagonal.
  const int v = (comm.rank() - root + p) % p;
  const auto real = [root, p](int vrank) { return (vrank + root) % p; };
  // Chunks [lo, hi) of the virtual ranks as one span (chunk p is "the end").
  const auto range = [&](int lo, int hi) {
    const std::int64_t begin = chunks.offset(lo);
    const std::int64_t end = hi >= p ? chunks.total() : chunks.offset(hi);
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  // Scatter, receive half: the parent sends everything our subtree needs,
  // chunks [v, v + lowest set bit of v).
  int mask = 1;
  while (mask < p) {
    if (v & mask) {
      const int parent = real(v - mask);
      const std::span<T> mine = range(v, v + mask);
      const std::int64_t got = comm.recv(mine, parent, tag);
      expect_count(comm, "broadcast scatter", parent, got, std::ssize(mine));
      break;
    }
    mask <<= 1;
  }
  // Scatter, send half: hand each child the chunks of its subtree.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < p) comm.send(range(v + mask, v + 2 * mask), real(v + mask), tag);
  }
  // Rank r now holds chunk v = r - root: the ring allgather passes the rest.
  allgather_ring(comm, data, chunks, tag, root);
  // @end
}

#define DTW_INSTANTIATE(T) template void broadcast_scatter_allgather<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
