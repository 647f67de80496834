// Step 01.5, recursive-halving reduce-scatter, in place: the same result as
// the ring (reduce_scatter_ring.cpp) in ⌊lg p⌋ exchanges for a power-of-two
// p, and any p through the fold of the chapter text's "Non-powers of two"
// (Pof2Core and core_bounds_by_rank, written in step 01.4). Two pieces:
// - reduce_scatter_halving_core: the power-of-two algorithm over the q core
//   ranks: afterwards core rank c holds, in data[bounds[c], bounds[c+1]), op
//   over that range of every core rank's data (Rabenseifner, step 01.9,
//   calls it with bounds of its own);
// - reduce_scatter_recursive_halving: any p; afterwards chunk r of rank r is
//   reduced over all p ranks, on every rank, paired or not.
//
// Contract: as reduce_scatter_ring (same layout, op and tag everywhere, p >= 2,
// op never kAvg, a count that differs ends in an error).
//
// Bytes on the wire: a core rank sends and reduces n(p-1)/p elements over
// ⌊lg p⌋ messages (the ring's bytes in fewer latencies); a rank outside the
// core sends its whole vector once and receives its reduced chunk once. Cost
// lg p·α + n(p-1)/p·(β + γ), plus those two messages for the pairs.
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_halving_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                                 std::span<const std::int64_t> bounds, ReduceOp op, int tag) {
  const auto range = [&](int lo, int hi) {
    const auto begin = bounds[static_cast<std::size_t>(lo)],
               end = bounds[static_cast<std::size_t>(hi)];
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  // @lab 01.5: Recursive halving on the power-of-two core: each round halves the range a rank keeps.
  // @hint 1: Each round, a core rank and its partner split the part they are still responsible
  // @hint 1: for in two halves: each keeps the half its own part lies in, gives the other half to
  // @hint 1: the partner and adds the partner's copy of its kept half into its own. The partner is
  // @hint 1: furthest away first (the highest bit), then nearer and nearer.
  // @hint 2: Hold core ranks [lo, hi) = [0, q). For d = q/2, q/4, ..., 1: mid = lo + d; the partner
  // @hint 2: is c ^ d; keep [lo, mid) if c < mid, else [mid, hi); send the other half, combine the
  // @hint 2: partner's message into the kept half, narrow [lo, hi) to it. Traps: keeping the half
  // @hint 2: you do not own leaves every rank with someone else's sum; both partners send first,
  // @hint 2: so the send must not block.
  // @hint 3: Request out = comm.isend(range(give_lo, give_hi), core.real(c ^ d), tag);
  // @hint 3: comm.recv_reduce(range(keep_lo, keep_hi), core.real(c ^ d), op, tag); comm.wait(out);
  // How this solution works (the lab shows none of it):
  // Recursive-halving reduce-scatter: in the first step rank j keeps one half of
  // the vector, sends the other half to rank j XOR p/2 and adds the half it
  // receives into the half it kept. Each following step halves again with a
  // partner at half the distance. After lg p steps each rank holds one fully
  // reduced p-th. For p = 4, rank 0 (blocks 0..3):
  //
  //   step 1 (⇄ 2): keep [0,1], send [2,3], add 2's [0,1]
  //   step 2 (⇄ 1): keep [0],   send [1],   add 1's [0]     → block 0 done
  //
  // Cost: lg p·α + n(p-1)/p·β + n(p-1)/p·γ: the ring's bytes and reductions in
  // lg p latencies. It is the first half of Rabenseifner's allreduce.
  //
  // Any p, the standard way (Pof2Core in algorithms.h): with q = 2^⌊lg p⌋ and
  // e = p - q, the odd rank of each of the first e pairs (0,1), (2,3), ... sends
  // its whole vector to its even partner, which adds it in; the odd rank then
  // sits out. The q core ranks halve over blocks laid out by real rank (a pair's
  // core rank owns both of its chunks), and at the end each even rank sends its
  // odd partner that partner's reduced chunk. The pairs pay n more elements
  // sent and reduced: a cost of non-powers of two.
  const int c = core.core_rank;
  int lo = 0, hi = core.q;
  for (int d = core.q / 2; d >= 1; d /= 2) {
    const int mid = lo + d;
    const int peer = core.real(c ^ d);
    // The lower half stays with the lower partner, the upper with the upper.
    const bool lower = c < mid;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    // Non-blocking send, then the fused receive+add: both partners do the same,
    // and each reads the half of the other that it keeps.
    Request out = comm.isend(range(give_lo, give_hi), peer, tag);
    comm.recv_reduce(range(keep_lo, keep_hi), peer, op, tag);
    comm.wait(out);
    lo = keep_lo;
    hi = keep_hi;
  }
  // @end
}

template <class T>
void reduce_scatter_recursive_halving(Comm& comm, std::span<T> data, const Chunks& chunks,
                                      ReduceOp op, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.5: Fold the extra ranks in, run the core, fold the result out.
  // @hint 1: Any p, in three moves (the chapter text, "Non-powers of two"): the rank of a pair that
  // @hint 1: sits out first gives its whole vector to its partner, which adds it to its own; the
  // @hint 1: core ranks run the power-of-two halving, each owning the chunks of the ranks it
  // @hint 1: stands for; last, every paired core rank gives its partner that partner's reduced
  // @hint 1: chunk.
  // @hint 2: core = Pof2Core(p, r); bounds = core_bounds_by_rank(core, chunks). Fold in: an odd
  // @hint 2: paired rank sends all of data; its partner combines it into data. Core ranks:
  // @hint 2: reduce_scatter_halving_core. Fold out: a paired core rank sends chunk partner; the
  // @hint 2: partner receives it into chunk r. Trap: a plain receive at the fold-in drops the
  // @hint 2: partner's contribution, and forgetting the fold-out leaves it with a wrong chunk;
  // @hint 2: both show only for p that is not a power of two.
  // @hint 3: comm.send(data, core.partner, tag) / comm.recv_reduce(data, core.partner, op, tag);
  // @hint 3: reduce_scatter_halving_core(comm, data, core, bounds, op, tag);
  // @hint 3: comm.send(chunks.of(data, core.partner), core.partner, tag) / comm.recv(chunks.of(
  // @hint 3: data, r), core.partner, tag) checked with expect_count.
  const Pof2Core core(p, r);
  const std::vector<std::int64_t> bounds = core_bounds_by_rank(core, chunks);
  // Fold in: the pair's sum is the even rank's business from now on.
  if (core.partner >= 0 && core.core_rank < 0) {
    comm.send(data, core.partner, tag);
  } else if (core.partner >= 0) {
    comm.recv_reduce(data, core.partner, op, tag);
  }
  if (core.core_rank >= 0) reduce_scatter_halving_core(comm, data, core, bounds, op, tag);
  // Fold out: the even rank holds both reduced chunks of the pair.
  if (core.partner >= 0 && core.core_rank >= 0) {
    comm.send(chunks.of(data, core.partner), core.partner, tag);
  } else if (core.partner >= 0) {
    const std::span<T> mine = chunks.of(data, r);
    const std::int64_t got = comm.recv(mine, core.partner, tag);
    expect_count(comm, "reduce_scatter fold-out", core.partner, got, std::ssize(mine));
  }
  // @end
}

#define DTW_INSTANTIATE(T)                                                                         \
  template void reduce_scatter_recursive_halving<T>(Comm&, std::span<T>, const Chunks&, ReduceOp, int); \
  template void reduce_scatter_halving_core<T>(Comm&, std::span<T>, const Pof2Core&,               \
                                               std::span<const std::int64_t>, ReduceOp, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
