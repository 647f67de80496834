// Step 01.9, Rabenseifner's allreduce, in place: afterwards every rank's
// `data` holds op over every rank's `data`, moving the ring's bytes in about
// 2 lg p steps instead of 2(p-1): a recursive-halving reduce-scatter followed
// by a recursive-doubling allgather (the chapter text, "Algorithms and their
// costs" and "Non-powers of two"). Build it from the power-of-two cores of
// 01.4 and 01.5 (allgather_doubling_core, reduce_scatter_halving_core) and
// Pof2Core; here the core cuts the vector into q nearly equal pieces,
// Chunks(n, q), one per core rank.
//
// Contract: same count, op and tag on every rank (p >= 2, op never kAvg);
// every rank, in the core or not, ends with the same bits (the test compares
// each with rank 0). A count that differs ends in an error; a fold-out
// receive checks its count with expect_count.
//
// Bytes on the wire, p a power of two: each rank sends n(p-1)/p elements in
// each phase, in lg p messages each, only to partners r XOR 2^k (the test
// checks the bytes, the messages and the partners for p = 2, 4, 8). Cost
// 2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ; for other p, the paired ranks pay one
// more vector each way.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void allreduce_rabenseifner(Comm& comm, std::span<T> data, ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.9: Rabenseifner: fold to a power of two, halving then doubling, fold out.
  // @hint 1: Fold the world down to a power of two (the ranks that sit out hand their vectors
  // @hint 1: to their partners, which combine them); on the core, halve until each core rank owns
  // @hint 1: one fully reduced piece, then double until each holds them all; last, hand the whole
  // @hint 1: result to the ranks that sat out. Halving and doubling must cut the vector the same
  // @hint 1: way: one piece per core rank.
  // @hint 2: core = Pof2Core(p, r); pieces = Chunks(n, core.q); bounds[c] = pieces.offset(c),
  // @hint 2: bounds[q] = n. Fold in: an odd paired rank sends data, its partner combines it in.
  // @hint 2: Core ranks: the halving core, then the doubling core, with these bounds. Fold out:
  // @hint 2: a paired core rank sends all of data, its partner receives it. Traps: a plain receive
  // @hint 2: at the fold-in drops a vector; forgetting the fold-out leaves the partner waiting
  // @hint 2: (both only for p not a power of two); stopping after the halving leaves every rank
  // @hint 2: with one right piece.
  // @hint 3: comm.send(data, core.partner, tag) / comm.recv_reduce(data, core.partner, op, tag);
  // @hint 3: reduce_scatter_halving_core(comm, data, core, bounds, op, tag);
  // @hint 3: allgather_doubling_core(comm, data, core, bounds, tag); comm.send(data,
  // @hint 3: core.partner, tag) / comm.recv(data, core.partner, tag) with expect_count(comm,
  // @hint 3: "allreduce rabenseifner fold-out", ...).
  // How this solution works (the lab shows none of it):
  // Rabenseifner's allreduce: a recursive-halving reduce-scatter (each rank ends
  // with one reduced piece) followed by a recursive-doubling allgather (the
  // pieces are swapped back in the reverse order of partners). It moves the same
  // bytes as the ring in 2 lg p steps instead of 2(p-1).
  //
  // Cost (Thakur, Rabenseifner, Gropp 2005), p a power of two:
  //     2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ
  // Each rank sends n/2 + n/4 + ... + n/p = n(p-1)/p elements in each half.
  // MPICH picks it for long messages, and for short ones when p is not tiny.
  //
  // Any p (Pof2Core in algorithms.h): with q = 2^⌊lg p⌋ and e = p - q,
  //  1. the first 2e ranks pair up (0,1), (2,3), ...; the odd one sends its
  //     whole vector to the even one, which adds it in; the odd one sits out;
  //  2. the q core ranks run halving + doubling on n elements cut into q pieces
  //     (Chunks(n, q): core rank c ends the halving with piece c);
  //  3. each even rank sends the full result to its odd partner.
  // Steps 1 and 3 add 2(α + nβ) + nγ for the paired ranks: the price of p not
  // being a power of two (e.g. p = 6 costs about as much as p = 8 plus that).
  //
  // Worked example, p = 4, n = 4 (one element per piece), ranks a, b, c, d:
  //
  //   halving, d = 2:  0⇄2, 1⇄3; rank 0 keeps [0,1]: a+c; rank 2 keeps [2,3]: a+c
  //   halving, d = 1:  0⇄1, 2⇄3; rank 0 keeps [0]: a0+b0+c0+d0, and so on
  //   doubling, d = 1: 0⇄1, 2⇄3; rank 0 holds [0,1] of the result
  //   doubling, d = 2: 0⇄2, 1⇄3; everyone holds all four
  //
  // Bytes on the wire, per rank: n/2 + n/4 + ... = n(p-1)/p in each phase.
  //
  // For p = 6 (q = 4, e = 2): ranks 1 and 3 hand their vectors to 0 and 2 and
  // sit out; core ranks 0, 2, 4, 5 run the p = 4 algorithm above; then 0 and 2
  // send the result to 1 and 3. The paired ranks pay one extra vector each way.
  //
  // Check yourself:
  // - Why must the doubling use partners in the reverse order of the halving?
  //   Each doubling step must rejoin exactly the two halves one halving step
  //   split apart, so the kept pieces line up into contiguous ranges.
  //
  // Try it: time it on 6 ranks and on 8: by the model, 6 ranks cost the
  // core's 4-rank run plus a fold-in and a fold-out of the whole vector.
  const Pof2Core core(p, r);
  // The core cuts the vector into q pieces, one per core rank.
  const Chunks pieces(std::ssize(data), core.q);
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(core.q) + 1);
  for (int c = 0; c < core.q; ++c) bounds[static_cast<std::size_t>(c)] = pieces.offset(c);
  bounds[static_cast<std::size_t>(core.q)] = pieces.total();
  // 1. Fold the extra ranks into the power-of-two core.
  if (core.partner >= 0 && core.core_rank < 0) {
    comm.send(data, core.partner, tag);
  } else if (core.partner >= 0) {
    comm.recv_reduce(data, core.partner, op, tag);
  }
  // 2. Halve down to one reduced piece per core rank, then double back up.
  if (core.core_rank >= 0) {
    reduce_scatter_halving_core(comm, data, core, bounds, op, tag);
    allgather_doubling_core(comm, data, core, bounds, tag);
  }
  // 3. Hand the result to the ranks that sat out.
  if (core.partner >= 0 && core.core_rank >= 0) {
    comm.send(data, core.partner, tag);
  } else if (core.partner >= 0) {
    const std::int64_t got = comm.recv(data, core.partner, tag);
    expect_count(comm, "allreduce rabenseifner fold-out", core.partner, got, std::ssize(data));
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void allreduce_rabenseifner<T>(Comm&, std::span<T>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
