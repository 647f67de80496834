// The online softmax: how ring attention adds up attention over key blocks
// it sees one at a time, without ever holding a row of T scores.
//
// For one query row, attention over a set of keys K is out_K = Σ_j e^(s_j)
// v_j / Z_K with Z_K = Σ_j e^(s_j); its log-sum-exp is lse_K = log Z_K. Over
// two disjoint sets A and B, Z_{A∪B} = Z_A + Z_B, hence
//
//     lse = log(e^lse_A + e^lse_B)
//     out = (Z_A·out_A + Z_B·out_B) / Z_{A∪B} = e^(lse_A − lse)·out_A + e^(lse_B − lse)·out_B
//
// Both lines are symmetric and associative in (A, B), so the blocks can come
// in any order -- the order the ring delivers them -- and the result equals
// the softmax over every key up to rounding. Adding out_A + out_B, or
// averaging them, forgets that each was normalised by its own Z: that is the
// bug the chapter's pitfall shows.
//
// Computed as written, e^lse overflows for large scores; subtracting the
// larger of the two first keeps every exponent ≤ 0. A row that has seen no
// key yet has lse = −∞ (Z = 0) and must simply take the other side.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sequence_parallelism.h"

namespace dtw::ch07 {

template <TrainElement T>
void merge_partial(T* out, T* lse, const T* part_out, const T* part_lse, std::int64_t rows,
                   std::int64_t head_dim) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = 0; i < rows; ++i) {
    T* o = out + i * head_dim;
    const T* po = part_out + i * head_dim;
    // @lab 07.3: Fold row i's partial (po, part_lse[i]) into (o, lse[i]) with the log-sum-exp.
    // @hint 1: Each side is a softmax normalised over its own keys only; the merged row weighs
    // @hint 1: each side by its share of the total normaliser, and the new log-sum-exp is the
    // @hint 1: log of the summed normalisers.
    // @hint 2: If the partial saw no key (lse −∞), keep the row. If the row saw none yet, take the
    // @hint 2: partial. Otherwise m = max(lse, lse_b); new = m + log(e^(lse−m) + e^(lse_b−m));
    // @hint 2: o = e^(lse−new)·o + e^(lse_b−new)·po. Never add the two outputs unweighted.
    // @hint 3: std::max, std::exp, std::log (or std::log1p); T(0) and kMinusInf for the empty cases.
    const T a = lse[i], b = part_lse[i];
    if (b == kMinusInf) continue;  // the block hid every key from this row
    if (a == kMinusInf) {
      std::copy_n(po, head_dim, o);
      lse[i] = b;
      continue;
    }
    const T m = std::max(a, b);
    const T merged = m + std::log(std::exp(a - m) + std::exp(b - m));
    const T wa = std::exp(a - merged), wb = std::exp(b - merged);
    for (std::int64_t d = 0; d < head_dim; ++d) o[d] = wa * o[d] + wb * po[d];
    lse[i] = merged;
    // @end
  }
}

template void merge_partial<float>(float*, float*, const float*, const float*, std::int64_t,
                                   std::int64_t);
template void merge_partial<double>(double*, double*, const double*, const double*, std::int64_t,
                                    std::int64_t);

}  // namespace dtw::ch07
