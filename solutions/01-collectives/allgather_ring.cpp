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
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allgather_ring(Comm& comm, std::span<T> data, const Chunks& chunks, int tag, int shift) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // "mine" is the chunk this rank starts with: r itself for a plain allgather,
  // r - root after broadcast's scatter.
  const int mine = r - shift;

  // @lab 01.4: Allgather around the ring: p-1 steps, one chunk each.
  // @hint 1: In step s = 0..p-2 send chunk mine-s to the right neighbour and receive chunk mine-s-1
  // @hint 1: from the left one (comm.sendrecv; chunks.of(data, i) wraps i modulo p).
  // @hint 2: A blocking send to the right followed by a receive from the left deadlocks a ring: use
  // @hint 2: sendrecv.
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
