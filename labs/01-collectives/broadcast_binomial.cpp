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

  DTW_TODO("01.1: Broadcast down a binomial tree rooted at `root`.");
}

#define DTW_INSTANTIATE(T) template void broadcast_binomial<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
