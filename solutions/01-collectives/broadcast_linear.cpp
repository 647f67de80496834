// Step 01.1, linear broadcast: afterwards every rank's `data` holds the root's
// `data`. The root talks to every other rank itself (no rank forwards).
//
// Contract: every rank calls with the same count, root and tag (dispatch.cpp
// has checked the arguments; p = 1 has returned already). A rank that
// receives a count other than data.size() says so with expect_count, naming
// "broadcast linear"; the root's `data` stays unchanged and must not be
// touched until the root's messages have all been delivered.
//
// Bytes on the wire: the root sends n elements to each of the other p-1 ranks,
// (p-1)·n in all, all of it through the root's link; no other rank sends.
// Cost (p-1)(α + nβ). The receivers should be able to copy at the same time.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void broadcast_linear(Comm& comm, std::span<T> data, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.1: Broadcast from the root straight to every other rank.
  // @hint 1: The root hands its whole message to each other rank itself; the others only listen
  // @hint 1: to the root. Let the root's messages all be in flight together, so that the receivers
  // @hint 1: copy at the same time rather than one after the other.
  // @hint 2: root: for every dst != root start a non-blocking send of data; then wait for all of
  // @hint 2: them. Every other rank: receive data from the root, then check the count that
  // @hint 2: arrived. Trap: the root must not send to itself (nobody would ever receive it).
  // @hint 3: comm.isend(data, dst, tag) into a std::vector<Request>, then comm.wait_all(sends); on
  // @hint 3: the others got = comm.recv(data, root, tag) and expect_count(comm, "broadcast
  // @hint 3: linear", root, got, std::ssize(data)).
  // How this solution works (the lab shows none of it):
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
  if (r == root) {
    // Post every send first and wait once: all peers can copy at the same time.
    std::vector<Request> sends;
    sends.reserve(static_cast<std::size_t>(p - 1));
    for (int dst = 0; dst < p; ++dst)
      if (dst != root) sends.push_back(comm.isend(data, dst, tag));
    comm.wait_all(sends);
  } else {
    // A receive checks what arrived: a shorter message means the ranks
    // disagree on the count (a longer one is refused by the backend itself).
    const std::int64_t got = comm.recv(data, root, tag);
    expect_count(comm, "broadcast linear", root, got, std::ssize(data));
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void broadcast_linear<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
