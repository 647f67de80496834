// Ring reduce-scatter: the data is cut into p chunks; each chunk travels once
// around the ring, and every rank it passes adds its own copy of that chunk.
// After p-1 steps each chunk has collected all p contributions and stops at
// the rank that owns it: rank r ends with the reduced chunk r.
//
//   step s:  rank r sends its partial chunk r-s-1 to r+1 and adds the partial
//            chunk r-s-2 arriving from r-1 into its own copy (indices mod p)
//
// Chunk c starts at rank c+1 (step 0 sends chunk (c+1)-1 = c), gains one
// contribution per hop, and after p-1 hops is complete at rank c.
//
// Cost: (p-1)α + n(p-1)/p·β + n(p-1)/p·γ. Each rank sends p-1 chunks, n(p-1)/p
// elements, and reduces as many: all links busy at once (busbw factor (p-1)/p).
//
// The receive and the addition are one call, comm.recv_reduce: a backend that
// can read the sender's memory (threads does) adds the incoming chunk straight
// into ours, reading 2 and writing 1 chunk per element instead of copying it to
// a scratch buffer first (read 1, write 1) and then adding (read 2, write 1).
//
// Worked example, p = 3, n = 3 (chunk i is element i), ranks holding a, b, c.
// In step s rank r sends chunk r-s-1 and adds the incoming chunk into its
// chunk r-s-2 (indices mod 3):
//
//   step 0: rank 0 sends a2 to rank 1 and adds c1 (from rank 2) into chunk 1;
//           rank 1 sends b0, adds a2 into chunk 2; rank 2 sends c1, adds b0.
//             rank 0: [a0, a1+c1, a2]  rank 1: [b0, b1, a2+b2]  rank 2: [b0+c0, c1, c2]
//   step 1: rank 0 sends a1+c1 to rank 1 and adds b0+c0 into chunk 0;
//           rank 1 adds a1+c1 into chunk 1; rank 2 adds a2+b2 into chunk 2.
//             rank 0: a0+b0+c0 in chunk 0, rank 1: a1+b1+c1 in chunk 1,
//             rank 2: a2+b2+c2 in chunk 2
//
// After p-1 steps rank r holds the complete chunk r, which is what the
// contract and reduce_scatter's caller expect. The other chunks hold partial
// sums: the contract calls `data` scratch for that reason.
//
// Pitfall: the send must not be of the chunk being added into. With indices
// r-s-1 and r-s-2 they differ for every p >= 2 (and p = 1 returns early).
//
// Check yourself:
// - Why an isend and not a blocking send? Every rank sends first; a
//   synchronous send on every rank would wait for receives nobody has posted.
// - How many reductions does each rank do? (p-1)·n/p elements: the work is
//   split evenly, unlike a reduce where the root does it all.
// - What must hold for the two chunks of one step to be different? p >= 2;
//   with p = 2 they are chunks r-1 and r, which differ.
// - Which chunk does the left neighbour send in step s? Its chunk
//   (r-1)-s-1 = r-s-2: exactly the one we add into.
// - Can the caller read `data` afterwards? Only chunk r is meaningful.
//
// Try it: its traffic table is the ring's diagonal, (p-1)/p of the array.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_ring(Comm& comm, std::span<T> data, const Chunks& chunks, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const int right = (r + 1) % p, left = (r + p - 1) % p;

  // @lab 01.5: Reduce-scatter around the ring: p-1 steps, one chunk each.
  // @hint 1: In step s = 0..p-2 isend chunk r-s-1 to the right, recv_reduce chunk r-s-2 from the
  // @hint 1: left into your copy, then wait for the send.
  // @hint 2: Chunks::of(data, i) wraps i modulo p, so the chunk indices can be written as in the
  // @hint 2: text (r - s - 1).
  for (int s = 0; s < p - 1; ++s) {
    // The send must be non-blocking: our right neighbour only takes it after
    // it has posted its own send, and so on around the ring. A blocking send
    // on every rank would wait forever for a receive nobody reaches.
    Request out = comm.isend(chunks.of(data, r - s - 1), right, tag);
    // The two chunks differ (p >= 2), so the peer reads one while we add into the other.
    comm.recv_reduce(chunks.of(data, r - s - 2), left, op, tag);
    comm.wait(out);
  }
  // @end
  // Rank r now holds the fully reduced chunk r; the other chunks hold partial sums.
}

#define DTW_INSTANTIATE(T) \
  template void reduce_scatter_ring<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
