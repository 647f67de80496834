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

  DTW_TODO("01.6: Broadcast as a binomial-tree scatter of the chunks, then a ring allgather.");
}

#define DTW_INSTANTIATE(T) template void broadcast_scatter_allgather<T>(Comm&, std::span<T>, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
