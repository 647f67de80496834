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
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_scatter_halving_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                                 std::span<const std::int64_t> bounds, ReduceOp op, int tag) {
  const int c = core.core_rank;
  const auto range = [&](int lo, int hi) {
    const auto begin = bounds[static_cast<std::size_t>(lo)],
               end = bounds[static_cast<std::size_t>(hi)];
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  // @lab 01.5: Recursive halving on the power-of-two core: each round halves the range a rank keeps.
  // @hint 1: Hold core ranks [lo, hi) = [0, q). For d = q/2, q/4, ..., 1: split at mid = lo+d, keep
  // @hint 1: the half holding c, isend the other half to core rank c^d (core.real), recv_reduce the
  // @hint 1: kept half from it, wait, narrow [lo, hi).
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
  const Pof2Core core(p, r);
  const std::vector<std::int64_t> bounds = core_bounds_by_rank(core, chunks);

  // @lab 01.5: Fold the extra ranks in, run the core, fold the result out.
  // @hint 1: Fold in (odd paired ranks send all of data to the even partner, which recv_reduces
  // @hint 1: it), run reduce_scatter_halving_core on core ranks, fold out (even paired ranks send
  // @hint 1: the partner's chunk, which it receives into its chunk).
  // @hint 2: Chapter text, 'Non-powers of two': the first 2(p-q) ranks pair up; the odd one of a
  // @hint 2: pair sits the core out.
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
