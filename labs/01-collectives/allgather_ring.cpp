// Step 01.4, ring allgather, in place: `data` is laid out as `chunks`
// (Chunks(n, p): chunk i belongs to rank i). On entry rank r's own chunk,
// chunk r - shift (mod p), holds its values (shift = 0 for a plain allgather;
// broadcast's scatter, step 01.6, leaves chunk r - root on rank r); the other
// chunks' contents do not matter. Afterwards every chunk holds its owner's
// values, on every rank.
//
// Contract: every rank calls with the same layout, tag and shift (p >= 2
// here). Each rank talks only to its two neighbours on the ring, r + 1 and
// r - 1 (mod p): the test checks that no other pair exchanges a byte. A chunk
// that arrives with another count than its size is reported with
// expect_count, naming "allgather ring". Empty chunks (count < p) are still
// sent, so every rank takes the same steps.
//
// Bytes on the wire: p-1 steps; in each, every rank sends one chunk to one
// neighbour and receives one from the other: n(p-1)/p elements per rank.
// Cost (p-1)α + n(p-1)/p·β. No step may deadlock, whatever p.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allgather_ring(Comm& comm, std::span<T> data, const Chunks& chunks, int tag, int shift) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  DTW_TODO("01.4: Allgather around the ring: p-1 steps, one chunk each.");
}

#define DTW_INSTANTIATE(T) template void allgather_ring<T>(Comm&, std::span<T>, const Chunks&, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
