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
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void scatter_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = out.size();

  DTW_TODO("01.3: Scatter from the root: block i of its input goes to rank i.");
}

#define DTW_INSTANTIATE(T) \
  template void scatter_linear<T>(Comm&, std::span<const T>, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
