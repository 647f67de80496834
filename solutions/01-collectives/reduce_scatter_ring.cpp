// Step 01.5, ring reduce-scatter, in place: `data` (n elements on every rank)
// is laid out as `chunks` (Chunks(n, p): chunk i belongs to rank i).
// Afterwards chunk r of rank r's `data` holds op over every rank's chunk r;
// the other chunks hold scratch (partial results).
//
// Contract: every rank calls with the same layout, op and tag (p >= 2, op
// never kAvg). Each rank talks only to its two neighbours on the ring, and
// sends only to the right one, r + 1 (mod p): the test checks it. A count
// that differs between ranks ends in an error (the fused receive-and-reduce
// checks its message's size). Empty chunks are still sent.
//
// Bytes on the wire: p-1 steps; in each, every rank sends one chunk right and
// receives one from the left, reducing it into its own copy: n(p-1)/p
// elements sent and reduced per rank. Cost (p-1)α + n(p-1)/p·(β + γ). No
// step may deadlock, whatever p.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_ring(Comm& comm, std::span<T> data, const Chunks& chunks, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.5: Reduce-scatter around the ring: p-1 steps, one chunk each.
  // @hint 1: Each chunk travels once around the ring, collecting one contribution at every rank
  // @hint 1: it passes, and stops, complete, at its owner. So in every step a rank passes on the
  // @hint 1: partial chunk it finished adding into in the step before, and adds the partial chunk
  // @hint 1: arriving from the other side into its own copy. Work out where chunk r must start so
  // @hint 1: that its last hop ends at rank r.
  // @hint 2: Step s = 0..p-2: send chunk r-s-1 to the right (r+1), combine chunk r-s-2 arriving
  // @hint 2: from the left into your copy; indices wrap modulo p (chunk c starts at rank c+1).
  // @hint 2: Traps: a blocking send before the receive deadlocks the ring; waiting for your send
  // @hint 2: before receiving does too; receiving into the chunk you are sending mixes the two.
  // @hint 3: Request out = comm.isend(chunks.of(data, r - s - 1), right, tag);
  // @hint 3: comm.recv_reduce(chunks.of(data, r - s - 2), left, op, tag); comm.wait(out);
  // How this solution works (the lab shows none of it):
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
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    // The send must be non-blocking: our right neighbour only takes it after
    // it has posted its own send, and so on around the ring. A blocking send
    // on every rank would wait forever for a receive nobody reaches.
    Request out = comm.isend(chunks.of(data, r - s - 1), right, tag);
    // The two chunks differ (p >= 2), so the peer reads one while we add into the other.
    comm.recv_reduce(chunks.of(data, r - s - 2), left, op, tag);
    comm.wait(out);
  }
  // Rank r now holds the fully reduced chunk r; the other chunks hold partial sums.
  // @end
}

#define DTW_INSTANTIATE(T) \
  template void reduce_scatter_ring<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
