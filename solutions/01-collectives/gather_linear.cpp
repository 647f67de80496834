// Step 01.3, linear gather: every rank contributes a block of m = in.size()
// elements; afterwards block i of the root's `out` (p·m elements, rank order,
// whatever the root) holds rank i's `in`. `out` is ignored on other ranks.
//
// Contract: same count, root and tag on every rank (dispatch.cpp has checked
// that the root's `out` holds p·m elements; p may be 1). The root's `in` may
// already be its own block of `out`. A block that arrives with another count
// than m is reported with expect_count, naming "gather". The root should not
// make a fast sender wait behind a slow one.
//
// Bytes on the wire: every non-root rank sends its m elements to the root
// once, (p-1)·m in all, all into the root's link; the root's own block moves
// by a local copy only. Cost (p-1)α + n(p-1)/p·β, n = p·m.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void gather_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = in.size();

  // @lab 01.3: Gather to the root: block i of its output comes from rank i.
  // @hint 1: Every rank but the root sends its block to the root; the root puts block i at
  // @hint 1: position i of its output and copies its own block there without a message. The root
  // @hint 1: does not know who is ready first, so it should be ready to take all blocks at once.
  // @hint 2: root: copy in to out[root·m, +m); start a receive of out[i·m, +m) from every rank
  // @hint 2: i != root; wait for all; then check each received count against m. Others: send in
  // @hint 2: to the root. Traps: spans count elements, so block i starts at i·m, not at i; a
  // @hint 2: blocking send to yourself never completes.
  // @hint 3: comm.copy_local(own, in); comm.irecv(out.subspan(i * m, m), i, tag) into a
  // @hint 3: std::vector<Request>; comm.wait_all(recvs); recvs[k].received_count() with
  // @hint 3: expect_count(comm, "gather", src, count, std::ssize(in)); elsewhere comm.send(in,
  // @hint 3: root, tag).
  // How this solution works (the lab shows none of it):
  // Linear gather: every rank sends its block to the root, which puts block i
  // at position i of `out`.
  //
  //          0 ──╮
  //          1 ──┼──► root: out = [ in_0 | in_1 | ... | in_{p-1} ]
  //        p-1 ──╯
  //
  // Cost: (p-1)α + n(p-1)/p·β with n = p·m elements gathered: the root receives
  // every block but its own, and its link carries all of it. A binomial tree
  // would save latencies (lg p instead of p-1) but not a single byte at the root.
  //
  // Worked example, p = 3, root 2, m = 2: rank r holds [r r].
  //
  //   root 2 copies [2 2] into out[4..6); posts receives for out[0..2) from 0
  //   and out[2..4) from 1; waits for both: out = [0 0 1 1 2 2].
  //
  // Why irecv for every source at once: the root does not know which rank will
  // be ready first. Posting all receives lets each arrive whenever its sender
  // gets there; a loop of blocking receives would make rank 2's send wait for
  // rank 1's, even if rank 1 is slow.
  //
  // After wait_all, each request knows how many elements arrived: a short
  // message means the sender passed a different count, which expect_count
  // reports with the rank and both numbers.
  //
  // Pitfalls: out must hold p·m elements at the root (dispatch checks it);
  // non-root ranks may pass an empty `out`.
  //
  // Check yourself:
  // - Which link carries the most? The root's: (p-1)·m elements arrive there.
  // - Why copy the root's own block instead of sending it? A blocking send to
  //   yourself would wait for a receive the same thread has not posted yet.
  // - May the root's `in` already sit inside `out` at block root (an "in place"
  //   gather)? Yes: the copy is skipped when the spans coincide.
  // - What is the order of blocks in `out`? Rank order, whatever the root; the
  //   root's block is at root·m, not at 0.
  // - What would a binomial gather save? Latency (lg p rounds instead of p-1
  //   messages into one rank), never bytes at the root.
  //
  // Try it: the traffic table of a gather has one non-empty column, the root's,
  // with one block per rank.
  if (r == root) {
    // Our own block needs no message (a world of one rank is just this copy).
    const std::span<T> own = out.subspan(static_cast<std::size_t>(root) * m, m);
    // (comm.copy_local works wherever the data lives, host or GPU; it is a
    // no-op when the caller passed its block of `out` as `in`.)
    comm.copy_local(own, in);
    // Post every receive at once: the senders can all copy in parallel, and
    // none waits behind a slower one.
    std::vector<Request> recvs;
    recvs.reserve(static_cast<std::size_t>(p));
    for (int src = 0; src < p; ++src)
      if (src != root)
        recvs.push_back(
            comm.irecv(out.subspan(static_cast<std::size_t>(src) * m, m), src, tag));
    comm.wait_all(recvs);
    for (std::size_t i = 0, src = 0; src < static_cast<std::size_t>(p); ++src) {
      if (static_cast<int>(src) == root) continue;
      expect_count(comm, "gather", static_cast<int>(src), recvs[i++].received_count(),
                   std::ssize(in));
    }
  } else {
    comm.send(in, root, tag);
  }
  // @end
}

#define DTW_INSTANTIATE(T) \
  template void gather_linear<T>(Comm&, std::span<const T>, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
