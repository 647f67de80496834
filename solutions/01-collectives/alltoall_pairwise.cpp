// Step 01.11, pairwise-exchange all-to-all: `in` and `out` hold p blocks of
// m = in.size() / p elements; afterwards block i of rank r's `out` holds block
// r of rank i's `in` (the transpose of the p×p matrix of blocks). The exchange
// behind Ulysses sequence parallelism and MoE token routing.
//
// Contract: same sizes and tag on every rank (dispatch.cpp has checked that
// in.size() == out.size(), divisible by p, and that they do not overlap; p
// may be 1). Each step is a permutation: every rank sends one block and
// receives one, so no rank is flooded by p-1 senders at once. A block that
// arrives with another count than m is reported with expect_count, naming
// "alltoall". No step may deadlock, whatever p.
//
// Bytes on the wire: every block but a rank's own leaves once, m elements to
// each other rank; every pair exchanges exactly one block each way (the test
// counts them). Cost (p-1)α + n(p-1)/p·β, n = in.size().
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void alltoall_pairwise(Comm& comm, std::span<const T> in, std::span<T> out, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = in.size() / static_cast<std::size_t>(p);
  const auto block = [m](auto span, int i) {
    return span.subspan(static_cast<std::size_t>(i) * m, m);
  };

  // @lab 01.11: All-to-all by pairwise exchange: p-1 steps, one partner each.
  // @hint 1: A rank's own block never leaves it. For the others, take p-1 steps; in each, every
  // @hint 1: rank sends to one rank and receives from one, so that over the steps every rank has
  // @hint 1: sent to and heard from every other exactly once, and within a step nobody gets two
  // @hint 1: messages. Shift the ranks by the same distance each step.
  // @hint 2: Copy block r of in to block r of out. For s = 1..p-1: send block r+s of in to rank
  // @hint 2: r+s and receive block r-s of out from rank r-s (mod p), both at once. Traps: sending
  // @hint 2: to and receiving from the same rank r+s matches nobody for odd p; a blocking send
  // @hint 2: before the receive deadlocks; forgetting the own block leaves it unset.
  // @hint 3: comm.copy_local(block(out, r), block(in, r)); got = comm.sendrecv(block(in, dst),
  // @hint 3: dst, block(out, src), src, tag); expect_count(comm, "alltoall", src, got, m).
  // How this solution works (the lab shows none of it):
  // Pairwise-exchange all-to-all: block j of every rank's `in` goes to rank j.
  // In step s = 1..p-1 rank r sends its block for rank r+s and receives the block
  // rank r-s has for it (indices mod p). Each step is a permutation: every rank
  // sends one message and receives one, so no rank is flooded by p-1 senders.
  //
  //   p = 4, step 1: 0→1 1→2 2→3 3→0   step 2: 0→2 1→3 2→0 3→1   step 3: 0→3 ...
  //
  // Cost: (p-1)α + n(p-1)/p·β with n = in.size() elements per rank (Thakur et al.
  // write it (p-1)α + nβ): every element but our own block leaves once. This is
  // the exchange behind Ulysses sequence parallelism and MoE token routing.
  //
  // Worked example, p = 3, one element per block, rank r's in = [r0 r1 r2]
  // (block j meant for rank j):
  //
  //   own block:  rank r copies its block r   → out[r] = rr
  //   step 1:     0→1 (01), 1→2 (12), 2→0 (20)
  //   step 2:     0→2 (02), 1→0 (10), 2→1 (21)
  //   after:      rank 0: [00 10 20]  rank 1: [01 11 21]  rank 2: [02 12 22]
  //
  // The result is the transpose of the p×p matrix of blocks: row r of `in` on
  // rank r becomes column r, stored as `out` on rank r.
  //
  // Bytes on the wire, per rank: sends (p-1)·m elements and receives as many,
  // m = in.size() / p. Unlike allgather or allreduce, nothing is forwarded or
  // combined: every element makes exactly one hop, so there is no algorithm
  // with fewer bytes, only ones with fewer or better-ordered messages.
  //
  // Why pairwise steps rather than posting all p-1 sends at once: with all at
  // once, every rank's p-1 messages race for the network at the same moment and
  // a rank may receive from many senders while others are idle. Pairwise steps
  // keep exactly one message per rank in flight each way. For tiny blocks the
  // Bruck algorithm (lg p steps, more bytes) wins instead.
  //
  // Pitfall: `in` and `out` must not overlap; a block of `out` may arrive
  // before the block of `in` at the same place has left.
  //
  // Check yourself:
  // - Is every step a permutation (each rank sends one and receives one)? Yes:
  //   r → r+s is a bijection for each s, and r-s → r is its inverse.
  // - How many messages in all? p(p-1), one per ordered pair of ranks.
  // - Why is there no in-place form? Block j of `in` and block j of `out`
  //   belong to different ranks' data; in place would need an extra buffer
  //   for every block not yet sent.
  // - Where does it show up later? Ulysses sequence parallelism (chapter 07)
  //   swaps a sequence split for a head split with exactly this exchange.
  //
  // Try it: the traffic table of an all-to-all is full (every off-diagonal cell
  // the same size): compare it with the ring's single diagonal and the naive
  // allreduce's single row and column.
  // Our own block never leaves the rank. comm.copy_local, not std::copy: on
  // the nccl backend the data lives on a GPU, where the host cannot touch it.
  comm.copy_local(block(out, r), block(in, r));
  for (int s = 1; s < p; ++s) {
    const int dst = (r + s) % p, src = (r - s + p) % p;
    // sendrecv: both directions at once, so the permutation never deadlocks.
    const std::int64_t got = comm.sendrecv(block(in, dst), dst, block(out, src), src, tag);
    expect_count(comm, "alltoall", src, got, static_cast<std::int64_t>(m));
  }
  // @end
}

#define DTW_INSTANTIATE(T) \
  template void alltoall_pairwise<T>(Comm&, std::span<const T>, std::span<T>, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
