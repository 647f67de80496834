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
    DTW_TODO("07.3: Fold row i's partial (po, part_lse[i]) into (o, lse[i]) with the log-sum-exp.");
  }
}

template void merge_partial<float>(float*, float*, const float*, const float*, std::int64_t,
                                   std::int64_t);
template void merge_partial<double>(double*, double*, const double*, const double*, std::int64_t,
                                    std::int64_t);

}  // namespace dtw::ch07
