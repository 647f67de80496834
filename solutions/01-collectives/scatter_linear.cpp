// Step 01.3, linear scatter: the root's `in` holds p blocks of m = out.size()
// elements; afterwards rank i's `out` holds block i. `in` is ignored on the
// other ranks (it may be empty there).
//
// Contract: same count, root and tag on every rank (dispatch.cpp has checked
// that the root's `in` holds p·m elements; p may be 1). A receiver that gets
// another count than m reports it with expect_count, naming "scatter". The
// root's `in` must stay untouched until every block has been delivered.
//
// Bytes on the wire: the root sends m elements to each other rank once,
// (p-1)·m in all, all through its link; its own block moves by a local copy.
// Cost (p-1)α + n(p-1)/p·β, n = p·m: gather, run backwards.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void scatter_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = out.size();

  // @lab 01.3: Scatter from the root: block i of its input goes to rank i.
  // @hint 1: Gather run backwards: the root cuts its input into p blocks and hands block i to
  // @hint 1: rank i, keeping its own block with a local copy; the others each receive one block.
  // @hint 1: Let the root's messages be in flight together.
  // @hint 2: root: copy in[root·m, +m) to out; start a send of in[i·m, +m) to every rank i !=
  // @hint 2: root; wait for all. Others: receive out from the root and check the count. Traps:
  // @hint 2: forgetting the root's own block (it sends nothing to itself, so nothing else fills
  // @hint 2: it); sending block root, or block r, instead of block i.
  // @hint 3: comm.copy_local(out, in.subspan(root * m, m)); comm.isend(in.subspan(dst * m, m),
  // @hint 3: dst, tag) into a std::vector<Request>; comm.wait_all(sends); elsewhere got =
  // @hint 3: comm.recv(out, root, tag) and expect_count(comm, "scatter", root, got,
  // @hint 3: std::ssize(out)).
  // How this solution works (the lab shows none of it):
  // Linear scatter: the root cuts `in` into p blocks and sends block i to rank i.
  //
  //                 ╭──► 0: out = in[0·m, 1·m)
  //   root: in ─────┼──► 1: out = in[1·m, 2·m)
  //                 ╰──► p-1
  //
  // Cost: (p-1)α + n(p-1)/p·β with n = p·m elements: the root sends every block
  // but its own, each exactly once. Gather run backwards.
  //
  // Worked example, p = 3, root 0, m = 2 elements per rank:
  //
  //   root's in:  [a a | b b | c c]
  //   rank 0 copies [a a] into its own out (no message);
  //   rank 1 receives [b b]; rank 2 receives [c c].
  //
  // Bytes on the wire: the root sends (p-1)·m elements, every other rank
  // receives m. Total (p-1)·m, the minimum, but all of it from the root.
  //
  // Why only the root reads `in`: other ranks may pass an empty span; the
  // contract says `in` is ignored there. Likewise only the root checks that
  // in.size() == p · out.size() (dispatch.cpp does it before any message).
  //
  // A binomial scatter (as in broadcast_scatter_allgather.cpp) would take
  // ⌈lg p⌉ rounds instead of p-1 sends: the root sends half of the blocks to
  // rank p/2, which forwards a quarter on, and so on. It moves more bytes in
  // total (blocks are forwarded), but the root's link carries the same
  // (p-1)·m, so it only saves latency.
  //
  // Pitfalls:
  // - Block i starts at element i·m of `in`, not at i: spans count elements.
  // - The root's own block is copied, not sent to itself (see broadcast_linear).
  // - A short message on a receiver means the ranks disagree on m; the count
  //   check reports it with both numbers.
  //
  // Use: handing out shards of a dataset or of a parameter vector (ZeRO in
  // chapter 04 starts from exactly this layout).
  //
  // Check yourself:
  // - What does rank r receive when m = 0? An empty message, which still
  //   proves that the root and rank r agree on the count.
  // - Which rank finishes first? Any receiver whose copy completes; the root
  //   waits for all p-1 sends.
  // - Is the root's `in` allowed to change before scatter returns? No: the
  //   receivers may still be reading it until wait_all completes.
  //
  // Try it: the traffic table of a scatter has one busy row, the root's: the
  // mirror image of a gather.
  if (r == root) {
    const std::span<const T> own = in.subspan(static_cast<std::size_t>(root) * m, m);
    // Our own block needs no message: a local copy (host or GPU memory alike).
    comm.copy_local(out, own);
    std::vector<Request> sends;
    sends.reserve(static_cast<std::size_t>(p));
    for (int dst = 0; dst < p; ++dst)
      if (dst != root)
        sends.push_back(
            comm.isend(in.subspan(static_cast<std::size_t>(dst) * m, m), dst, tag));
    comm.wait_all(sends);
  } else {
    const std::int64_t got = comm.recv(out, root, tag);
    expect_count(comm, "scatter", root, got, std::ssize(out));
  }
  // @end
}

#define DTW_INSTANTIATE(T) \
  template void scatter_linear<T>(Comm&, std::span<const T>, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
