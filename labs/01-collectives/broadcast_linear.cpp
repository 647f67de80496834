// Linear broadcast: the root sends the whole message to every other rank.
//
//          root ──► 1
//           │ ╲───► 2
//           ╰─────► p-1
//
// Cost: (p-1)(α + nβ) when the root's link is the bottleneck, which it is: the
// root sends (p-1)n bytes while every other rank receives n. The time grows
// linearly with p, which is what the tree and scatter-allgather versions fix.
// It is still the right choice for p = 2, and a fine first version.
//
// Worked example, p = 4, root 1, a message of 1 MiB:
//
//   rank 1 posts three sends (to 0, 2 and 3) and waits for all of them;
//   ranks 0, 2 and 3 each receive 1 MiB from rank 1.
//   The root's link carries 3 MiB; every other link carries at most 1 MiB.
//
// Bytes on the wire: the root sends (p-1)·n elements; every other rank
// receives n. The total is the minimum any broadcast must move, (p-1)·n, but
// it all goes through one link, so the time is (p-1)·n·β however fast the
// other links are.
//
// Why isend + wait_all instead of p-1 blocking sends: a blocking send is
// synchronous, so the root would wait for rank 0 to take its copy before even
// offering it to rank 2. With every send posted first, the receivers can copy
// at the same time; on the threads backend each receiver copies its own
// message, so p-1 copies run in parallel on as many cores as there are.
//
// Pitfalls:
// - The root must not send to itself: a blocking self-send waits for a receive
//   that the same thread would only post afterwards.
// - A receiver must not assume the message fills its buffer: recv returns the
//   count that arrived, and expect_count turns a short message (ranks that
//   disagree on the count) into a clear error instead of stale data.
// - Do not touch `data` on the root before wait_all returns: the receivers
//   may still be reading it.
//
// Check yourself:
// - How long does the broadcast take on the threads backend for p = 8 and
//   64 MiB? About as long as 7 copies of 64 MiB sharing the memory bandwidth.
// - Which rank returns first? A receiver, as soon as its copy lands; the root
//   returns last, after all p-1 sends completed.
// - What if the root is p-1 instead of 0? Nothing changes but the loop's skip:
//   a linear broadcast has no tree to rotate.
// - Does it matter in which order the sends are posted? Not for correctness;
//   on a real network the order decides who gets the link first.
// - What happens with n = 0? Empty messages still go out, which keeps
//   every rank's count check meaningful.
//
// Try it: its traffic table has one busy row, the root's.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void broadcast_linear(Comm& comm, std::span<T> data, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.1: Broadcast from the root straight to every other rank.");
}

#define DTW_INSTANTIATE(T) template void broadcast_linear<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
