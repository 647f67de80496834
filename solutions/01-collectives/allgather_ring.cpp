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

  // @lab 01.4: Allgather around the ring: p-1 steps, one chunk each.
  // @hint 1: Picture the chunks as parcels passed hand to hand around the ring: in every step
  // @hint 1: each rank passes on the parcel it got in the step before (first its own) in one
  // @hint 1: direction and takes a new one from the other side. After p-1 steps every parcel has
  // @hint 1: visited every rank. Sending and receiving must happen together, or a ring of
  // @hint 1: waiting senders never moves.
  // @hint 2: right = r + 1, left = r - 1 (mod p); mine = r - shift. In step s = 0..p-2 send chunk
  // @hint 2: mine - s to the right and receive chunk mine - s - 1 from the left. Chunk indices
  // @hint 2: wrap modulo p. Traps: receiving mine - s + 1 walks the ring the wrong way (right
  // @hint 2: only for p = 2); a blocking send followed by a receive deadlocks.
  // @hint 3: got = comm.sendrecv(chunks.of(data, mine - s), right, in, left, tag) with in =
  // @hint 3: chunks.of(data, mine - s - 1); expect_count(comm, "allgather ring", left, got,
  // @hint 3: std::ssize(in)).
  // How this solution works (the lab shows none of it):
  // Ring allgather: every rank starts with its own chunk and passes chunks to its
  // right neighbour, one per step, each step forwarding the chunk it received in
  // the step before. After p-1 steps every chunk has visited every rank.
  //
  //   step 0:  rank r sends chunk r   to r+1, receives chunk r-1 from r-1
  //   step 1:  rank r sends chunk r-1 to r+1, receives chunk r-2 from r-1
  //   ...      (chunk indices modulo p)
  //
  // Cost: (p-1)α + n(p-1)/p·β for n elements in all. Each rank sends and
  // receives p-1 chunks, n(p-1)/p elements: every link of the ring carries the
  // same load at the same time, so no link is the bottleneck (busbw factor (p-1)/p).
  // The price is p-1 latencies, which dominates for small messages.
  //
  // Worked example, p = 4, rank r holding block Br (plain allgather, shift 0):
  //
  //   step 0:  0→1 B0   1→2 B1   2→3 B2   3→0 B3
  //   step 1:  0→1 B3   1→2 B0   2→3 B1   3→0 B2
  //   step 2:  0→1 B2   1→2 B3   2→3 B0   3→0 B1
  //   after:   every rank holds B0 B1 B2 B3
  //
  // In step s each rank forwards exactly the block it received in step s-1, so
  // no rank waits for data it does not yet have.
  //
  // Bytes on the wire, per rank: p-1 messages, each one block; with blocks of
  // m elements, (p-1)·m sent and received, the minimum for allgather.
  //
  // Why sendrecv and not send-then-recv: every rank sends first, and a
  // synchronous send returns only once the receiver has the data; with every
  // rank stuck in its send, nobody receives. sendrecv posts both halves before
  // waiting, which breaks the cycle. (Try it: replace it by send + recv and the
  // deadlock detector shows the wait-for cycle around the ring.)
  //
  // The `shift` parameter exists for the scatter-allgather broadcast, where rank
  // r starts with chunk r - root instead of chunk r: the walk around the ring is
  // the same, only the starting chunk moves.
  //
  // Blocks of unequal size work unchanged (dtw::Chunks gives the first n % p
  // chunks one element more): a message simply carries the size of its chunk.
  //
  // Check yourself:
  // - How many messages does the whole ring send? p(p-1), each of one block.
  // - Which rank finishes first? All finish in the same step p-2; nobody is
  //   ahead, which is the point of a ring.
  // - What if one link is slower than the others? Every step waits for it: a
  //   ring runs at the speed of its slowest link (NCCL builds its rings to
  //   avoid the slow ones).
  //
  // Try it: the traffic table of a ring allgather has one non-empty cell per
  // row, r → r+1, each holding (p-1) blocks: the same on every row, which is
  // what "bandwidth-optimal" looks like.
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // "mine" is the chunk this rank starts with: r itself for a plain allgather,
  // r - root after broadcast's scatter.
  const int mine = r - shift;
  for (int s = 0; s < p - 1; ++s) {
    // Forward what arrived in the previous step (in step 0: our own chunk);
    // sendrecv posts both halves at once, so the ring never deadlocks.
    const std::span<T> in = chunks.of(data, mine - s - 1);
    const std::int64_t got =
        comm.sendrecv(chunks.of(data, mine - s), right, in, left, tag);
    expect_count(comm, "allgather ring", left, got, static_cast<std::int64_t>(in.size()));
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void allgather_ring<T>(Comm&, std::span<T>, const Chunks&, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
