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

  DTW_TODO("01.1: Broadcast from the root straight to every other rank.");
}

#define DTW_INSTANTIATE(T) template void broadcast_linear<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
