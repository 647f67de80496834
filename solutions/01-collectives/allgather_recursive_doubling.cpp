// Step 01.4, recursive-doubling allgather, in place: the same result as the
// ring (allgather_ring.cpp, shift 0) in ⌊lg p⌋ exchanges for a power-of-two p,
// and any p through the fold of the chapter text's "Non-powers of two".
// Four pieces, declared in algorithms.h:
// - Pof2Core(p, rank) and Pof2Core::real: the fold's numbers for one rank
//   (what each field means is in algorithms.h);
// - core_bounds_by_rank: where each core rank's part of `data` starts;
// - allgather_doubling_core: the power-of-two algorithm over the q core
//   ranks: core rank c starts with data[bounds[c], bounds[c+1]) and ends with
//   all of data[bounds[0], bounds[q]) (Rabenseifner, step 01.9, calls it with
//   bounds of its own);
// - allgather_recursive_doubling: any p, from the three above.
//
// Contract: as allgather_ring (same layout and tag everywhere, p >= 2, a
// count that differs is reported with expect_count). The core ranks'
// exchanges are between partners whose core numbers differ in one bit.
//
// Bytes on the wire: a core rank sends n(p-1)/p elements in all over ⌊lg p⌋
// messages (more for a core rank with a partner); a rank outside the core
// sends its chunk once and receives the whole result once. Cost lg p·α +
// n(p-1)/p·β, plus one message each way for the paired ranks.
#include "algorithms.h"

namespace dtw::ch01::detail {

Pof2Core::Pof2Core(int p, int rank) {
  // @lab 01.4: Work out this rank's place in the power-of-two core.
  // @hint 1: Find the largest power of two q that fits in p; the p - q ranks too many are folded
  // @hint 1: in by pairing the first 2(p - q) ranks. The even rank of each pair stays in the core,
  // @hint 1: the odd one sits out; every rank after the pairs is in the core on its own.
  // @hint 2: q: double from 1 while 2q <= p; extra = p - q. rank < 2·extra: partner = rank ^ 1,
  // @hint 2: core_rank = rank / 2 for an even rank, -1 for an odd one. Otherwise partner = -1 and
  // @hint 2: core_rank = rank - extra (the core numbers stay consecutive). Trap: rank - 2·extra
  // @hint 2: gives two ranks the same core number.
  // @hint 3: Plain integer arithmetic, no calls: fill q, extra, core_rank and partner.
  q = 1;
  while (q * 2 <= p) q *= 2;
  extra = p - q;
  if (rank < 2 * extra) {
    partner = rank ^ 1;
    core_rank = rank % 2 == 0 ? rank / 2 : -1;
  } else {
    partner = -1;
    core_rank = rank - extra;
  }
  // @end
}

int Pof2Core::real(int c) const {
  // @lab 01.4: The real rank of core rank c.
  // @hint 1: Undo the numbering of the constructor: paired core ranks are the even ranks of the
  // @hint 1: pairs, the others follow the pairs.
  // @hint 2: c < extra: 2c; otherwise c + extra.
  // @hint 3: No calls: one conditional expression.
  return c < extra ? 2 * c : c + extra;
  // @end
}

std::vector<std::int64_t> core_bounds_by_rank(const Pof2Core& core, const Chunks& chunks) {
  // @lab 01.4: Where each core rank's part of the data starts.
  // @hint 1: A core rank stands for the chunks of the real ranks it represents (its pair's two, or
  // @hint 1: its own), which lie next to each other: its part starts where the chunk of its real
  // @hint 1: rank starts, and the last part ends at the end of the data.
  // @hint 2: q + 1 offsets: bounds[c] = offset of the chunk of real(c), bounds[q] = n.
  // @hint 3: chunks.offset(core.real(c)) for c = 0..q-1 and chunks.total() last.
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(core.q) + 1);
  for (int c = 0; c < core.q; ++c)
    bounds[static_cast<std::size_t>(c)] = chunks.offset(core.real(c));
  bounds[static_cast<std::size_t>(core.q)] = chunks.total();
  return bounds;
  // @end
}

template <class T>
void allgather_doubling_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                             std::span<const std::int64_t> bounds, int tag) {
  // Data of core ranks [lo, hi) as a span.
  const auto range = [&](int lo, int hi) {
    const auto begin = bounds[static_cast<std::size_t>(lo)],
               end = bounds[static_cast<std::size_t>(hi)];
    return data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
  };
  // @lab 01.4: Recursive doubling on the power-of-two core: each round doubles the range a rank holds.
  // @hint 1: Each round, a core rank swaps everything it holds with a partner that holds the same
  // @hint 1: amount right next to it; afterwards both hold twice as much, so after lg q rounds
  // @hint 1: everyone holds everything. The partners are the core ranks whose numbers differ from
  // @hint 1: yours in one bit: the lowest bit first.
  // @hint 2: Hold core ranks [lo, hi) = [c, c+1). For d = 1, 2, 4, ... < q: the partner is c ^ d,
  // @hint 2: and it holds the d core ranks just below lo if c has the bit d, just above hi if
  // @hint 2: not; send range(lo, hi), receive its range, widen [lo, hi) to cover both. Trap: the
  // @hint 2: exchange goes to the partner's real rank, not its core number.
  // @hint 3: got = comm.sendrecv(range(lo, hi), core.real(c ^ d), in, core.real(c ^ d), tag) with
  // @hint 3: in = range(peer_lo, peer_hi); expect_count(comm, "allgather recursive doubling",
  // @hint 3: peer, got, std::ssize(in)).
  // How this solution works (the lab shows none of it):
  // Recursive-doubling allgather: in step k rank j swaps everything it has with
  // rank j XOR 2^k. What each rank holds doubles every step: after lg p steps it
  // has all p blocks. For p = 8, rank 0 holds:
  //
  //   start:  [0]      step 1 (⇄ 1):  [0,1]      step 2 (⇄ 2):  [0..3]
  //   step 3 (⇄ 4):  [0..7]
  //
  // Cost: lg p·α + n(p-1)/p·β. The same bytes as the ring in only lg p
  // latencies: the choice for small and medium messages (MPICH uses it below
  // 512 KiB). Its weakness: partners 2^k apart are far apart in a real network.
  //
  // Any p (Pof2Core in algorithms.h): with q = 2^⌊lg p⌋ and e = p - q, the odd
  // rank of each of the first e pairs (0,1), (2,3), ... hands its block to its
  // even partner and sits out; the q remaining "core" ranks run the doubling,
  // core rank c owning the blocks of the real ranks it stands for (two for a
  // pair, one otherwise: consecutive blocks, so still one range); at the end each
  // even rank hands the full result to its odd partner. Two extra messages for
  // the paired ranks, still ⌊lg p⌋ + 2 steps.
  const int c = core.core_rank;
  int lo = c, hi = c + 1;
  for (int d = 1; d < core.q; d *= 2) {
    const int peer = core.real(c ^ d);
    // The partner holds the d core ranks next to ours: below if our bit d is
    // set, above otherwise. Swap, and our range has doubled.
    const int peer_lo = (c & d) ? lo - d : hi, peer_hi = peer_lo + d;
    const std::span<T> in = range(peer_lo, peer_hi);
    const std::int64_t got = comm.sendrecv(range(lo, hi), peer, in, peer, tag);
    expect_count(comm, "allgather recursive doubling", peer, got, std::ssize(in));
    lo = std::min(lo, peer_lo);
    hi = std::max(hi, peer_hi);
  }
  // @end
}

template <class T>
void allgather_recursive_doubling(Comm& comm, std::span<T> data, const Chunks& chunks, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.4: Fold the extra ranks in, run the core, fold the result out.
  // @hint 1: Any p, in three moves (the chapter text, "Non-powers of two"): the rank of a pair that
  // @hint 1: sits out first gives its chunk to its partner; the core ranks run the power-of-two
  // @hint 1: doubling, each owning the chunks of the ranks it stands for; last, every paired core
  // @hint 1: rank gives the whole result to the partner that sat out.
  // @hint 2: core = Pof2Core(p, r); bounds = core_bounds_by_rank(core, chunks). Fold in: an odd
  // @hint 2: paired rank sends chunk r to its partner, which receives it into that chunk. Core
  // @hint 2: ranks: allgather_doubling_core. Fold out: a paired core rank sends all of data; its
  // @hint 2: partner receives it. Trap: leaving out either fold gives wrong chunks or a rank that
  // @hint 2: waits for ever, but only for p that is not a power of two.
  // @hint 3: comm.send(chunks.of(data, r), core.partner, tag) / comm.recv(chunks.of(data,
  // @hint 3: core.partner), core.partner, tag); allgather_doubling_core(comm, data, core, bounds,
  // @hint 3: tag); comm.send(data, core.partner, tag) / comm.recv(data, core.partner, tag), each
  // @hint 3: receive checked with expect_count.
  const Pof2Core core(p, r);
  const std::vector<std::int64_t> bounds = core_bounds_by_rank(core, chunks);
  // Fold in: the odd rank's block joins its partner's, right after it.
  if (core.partner >= 0 && core.core_rank < 0) {
    comm.send(chunks.of(data, r), core.partner, tag);
  } else if (core.partner >= 0) {
    const std::span<T> theirs = chunks.of(data, core.partner);
    const std::int64_t got = comm.recv(theirs, core.partner, tag);
    expect_count(comm, "allgather fold-in", core.partner, got, std::ssize(theirs));
  }
  // The power-of-two core swaps doubling ranges.
  if (core.core_rank >= 0) allgather_doubling_core(comm, data, core, bounds, tag);
  // Fold out: the partner that sat out gets everything.
  if (core.partner >= 0 && core.core_rank >= 0) {
    comm.send(data, core.partner, tag);
  } else if (core.partner >= 0) {
    const std::int64_t got = comm.recv(data, core.partner, tag);
    expect_count(comm, "allgather fold-out", core.partner, got, std::ssize(data));
  }
  // @end
}

#define DTW_INSTANTIATE(T)                                                           \
  template void allgather_recursive_doubling<T>(Comm&, std::span<T>, const Chunks&, int); \
  template void allgather_doubling_core<T>(Comm&, std::span<T>, const Pof2Core&,     \
                                           std::span<const std::int64_t>, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
