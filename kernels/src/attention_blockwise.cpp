// Blockwise attention: one block of keys at a time, merged by log-sum-exp.
//
// Softmax over a row of scores s_j normalises by Σ_j e^{s_j}. Split the keys
// into blocks B₁, B₂, ...; each block alone gives a partial output
//   o_b = Σ_{j∈b} e^{s_j − lse_b} v_j,   lse_b = log Σ_{j∈b} e^{s_j},
// i.e. the exact attention output if the row had only those keys. The full
// result is a weighted mean of the partials, the weight of block b being its
// share of the total mass, e^{lse_b − lse} with lse = log Σ_b e^{lse_b}. So
// (o, lse) pairs merge pairwise, associatively and commutatively, and nothing
// of size q_len × kv_len ever has to exist at once: the basis of
// FlashAttention (one device) and ring attention (blocks live on other ranks).
//
// Backward recomputes each block's probabilities from the saved lse, so only
// out and lse (q_len·(head_dim+1) numbers per head) are kept between passes.
//
// Work is split as in attention.cpp: GEMMs through matmul per (batch, head),
// the softmax parts as loops, one parallel_for over batch·heads. Within one
// head, a block of keys is contiguous rows of k and v, so the whole-sequence
// functions below reuse the per-head block routines without copying.
#include "dtw/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_common.h"
#include "dtw/errors.h"
#include "dtw/kernels/matmul.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "vector_exp.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

using detail::check_attention_causal;
using detail::check_attention_shape;
using detail::score_scale;

// The whole-sequence forms follow attention_forward's rules.
void check_blockwise(const char* fn, const AttentionShape& s, std::int64_t block, bool causal) {
  check_attention_shape(fn, s);
  DTW_CHECK_ARG(block > 0, fn << ": block " << block << " must be positive");
  check_attention_causal(fn, s, causal);
}

template <class T>
constexpr T kMinusInf = -std::numeric_limits<T>::infinity();

// One head's view of a block: q rows at positions q_offset.., k/v rows at
// k_offset.., each row head_dim long and contiguous.
struct Block {
  std::int64_t q_len, kv_len, head_dim, q_offset, k_offset;
  bool causal;
  // Query rows before first_row() see no key of the block (all in their
  // future); the GEMMs skip them, which halves causal work overall.
  std::int64_t first_row() const {
    return causal ? std::clamp(k_offset - q_offset, std::int64_t{0}, q_len) : 0;
  }
  // Keys 0..visible(i)−1 of the block are visible to query row i ≥ first_row().
  std::int64_t visible(std::int64_t i) const {
    return causal ? std::min(kv_len, q_offset + i - k_offset + 1) : kv_len;
  }
};

// out, lse of one head over one block (overwritten).
template <class T>
void block_forward_head(T* out, T* lse, const T* q, const T* k, const T* v, const Block& b) {
  const std::int64_t d = b.head_dim, i0 = b.kv_len == 0 ? b.q_len : b.first_row();
  std::fill(out, out + i0 * d, T(0));
  std::fill(lse, lse + i0, kMinusInf<T>);
  const std::int64_t rows = b.q_len - i0;
  if (rows == 0) return;
  // Scores s = scale · q kᵀ of rows i0.., turned in place into this block's
  // own softmax p = e^{s − max} / Σ e^{s − max}, with lse = max + log Σ.
  std::vector<T> p(static_cast<std::size_t>(rows * b.kv_len));
  matmul(Trans::kNo, Trans::kYes, rows, b.kv_len, d, score_scale<T>(d), q + i0 * d, k, T(0),
         p.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = p.data() + r * b.kv_len;
    const std::int64_t visible = b.visible(i0 + r);  // ≥ 1 from i0 on
    const T max = detail::row_max(row, visible);
    // vector_exp.h's exp (vectorised in float), summed in double; sum ≥ 1.
    const double sum = detail::exp_shifted_sum(row, row, max, visible);
    const T inv = static_cast<T>(1.0 / sum);
    for (std::int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (std::int64_t j = visible; j < b.kv_len; ++j) row[j] = T(0);
    lse[i0 + r] = max + static_cast<T>(std::log(sum));  // = log Σ e^s, without overflowing e^s
  }
  matmul(Trans::kNo, Trans::kNo, rows, d, b.kv_len, T(1), p.data(), v, T(0), out + i0 * d);
}

// (out, lse) ⊕= (out_b, lse_b) for `rows` rows: the online-softmax merge.
// lse' is the log of the summed masses and out' the mass-weighted mean of the
// two outputs; both operations are associative and commutative, so blocks may
// arrive in any order (as they do around a ring) with the same result.
template <class T>
void merge_rows(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows, std::int64_t d) {
  for (std::int64_t i = 0; i < rows; ++i) {
    T* o = out + i * d;
    const T* ob = out_b + i * d;
    // −∞ means "no mass": that side contributes nothing. Handled first, since
    // the formulas below would compute −∞ − (−∞) = NaN when both are −∞.
    if (lse_b[i] == kMinusInf<T>) continue;
    if (lse[i] == kMinusInf<T>) {
      lse[i] = lse_b[i];
      std::copy(ob, ob + d, o);
      continue;
    }
    // lse' = log(e^a + e^b) = max + log(1 + e^{min−max}): the exponent is ≤ 0,
    // so nothing overflows however large the scores.
    const T hi = std::max(lse[i], lse_b[i]), lo = std::min(lse[i], lse_b[i]);
    const T merged = hi + std::log1p(std::exp(lo - hi));
    // Each side's weight is its share of the total mass; the two sum to 1.
    const T w = std::exp(lse[i] - merged), wb = std::exp(lse_b[i] - merged);
    for (std::int64_t c = 0; c < d; ++c) o[c] = w * o[c] + wb * ob[c];
    lse[i] = merged;
  }
}

// One head's gradient contribution from one block; accumulates into dq (all
// q rows) and dk, dv (the block's rows). delta[i] = D_i = Σ_c dO_ic · out_ic.
//
// Recomputation: with the final lse of row i, exp(s_ij − lse_i) is exactly the
// probability P_ij of the *full* softmax, block or no block. Then, as in plain
// attention (out = P V, S = scale · Q Kᵀ):
//   dV += Pᵀ dO          dP = dO Vᵀ          dS = P ∘ (dP − D)
//   dQ += scale · dS K   dK += scale · dSᵀ Q
// The softmax backward needs Σ_j P_ij dP_ij over *all* keys of row i, which
// one block cannot sum; but Σ_j P_ij (dO_i · V_j) = dO_i · Σ_j P_ij V_j =
// dO_i · out_i, so D_i comes from the final output instead.
template <class T>
void block_backward_head(T* dq, T* dk, T* dv, const T* dout, const T* lse, const T* delta,
                         const T* q, const T* k, const T* v, const Block& b) {
  const std::int64_t d = b.head_dim, i0 = b.first_row(), rows = b.q_len - i0;
  if (rows == 0 || b.kv_len == 0) return;
  const T scale = score_scale<T>(d);
  const auto size = static_cast<std::size_t>(rows * b.kv_len);
  std::vector<T> p(size), ds(size);
  matmul(Trans::kNo, Trans::kYes, rows, b.kv_len, d, scale, q + i0 * d, k, T(0), p.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = p.data() + r * b.kv_len;
    // Rows from i0 on see a key of this block, so their final lse is finite.
    const std::int64_t visible = b.visible(i0 + r);
    detail::exp_shifted(row, row, lse[i0 + r], visible);
    for (std::int64_t j = visible; j < b.kv_len; ++j) row[j] = T(0);
  }
  const T* go = dout + i0 * d;
  matmul(Trans::kYes, Trans::kNo, b.kv_len, d, rows, T(1), p.data(), go, T(1), dv);
  matmul(Trans::kNo, Trans::kYes, rows, b.kv_len, d, T(1), go, v, T(0), ds.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* prow = p.data() + r * b.kv_len;
    T* row = ds.data() + r * b.kv_len;
    for (std::int64_t j = 0; j < b.kv_len; ++j) row[j] = prow[j] * (row[j] - delta[i0 + r]);
  }
  matmul(Trans::kNo, Trans::kNo, rows, d, b.kv_len, scale, ds.data(), k, T(1), dq + i0 * d);
  matmul(Trans::kYes, Trans::kNo, b.kv_len, d, rows, scale, ds.data(), q + i0 * d, T(1), dk);
}

// D_i = Σ_c dO_ic · out_ic for one head's q_len rows.
template <class T>
std::vector<T> row_deltas(const T* dout, const T* out, std::int64_t q_len, std::int64_t d) {
  std::vector<T> delta(static_cast<std::size_t>(q_len));
  for (std::int64_t i = 0; i < q_len; ++i) {
    T sum = 0;
    for (std::int64_t c = 0; c < d; ++c) sum += dout[i * d + c] * out[i * d + c];
    delta[static_cast<std::size_t>(i)] = sum;
  }
  return delta;
}

}  // namespace

template <class T>
void attention_block_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& shape, std::int64_t q_offset,
                             std::int64_t k_offset, bool causal) {
  check_attention_shape("attention_block_forward", shape);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads * tq == 0) return;
  ensure_kokkos_initialized();
  const Block b{tq, tk, d, q_offset, k_offset, causal};
  Kokkos::parallel_for("dtw::attention_block_forward", host_range(0, heads), [=](std::int64_t bh) {
    block_forward_head(out + bh * tq * d, lse + bh * tq, q + bh * tq * d, k + bh * tk * d,
                       v + bh * tk * d, b);
  });
}

template <class T>
void attention_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                     std::int64_t head_dim) {
  DTW_CHECK_ARG(rows >= 0 && head_dim >= 0, "attention_merge: sizes must not be negative (rows "
                                                << rows << ", head_dim " << head_dim << ")");
  if (rows == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::attention_merge", host_range(0, rows), [=](std::int64_t i) {
    merge_rows(out + i * head_dim, lse + i, out_b + i * head_dim, lse_b + i, 1, head_dim);
  });
}

template <class T>
void attention_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                              const T* q, const T* k, const T* v, const AttentionShape& shape,
                              std::int64_t q_offset, std::int64_t k_offset, bool causal) {
  check_attention_shape("attention_block_backward", shape);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads == 0) return;
  ensure_kokkos_initialized();
  const Block b{tq, tk, d, q_offset, k_offset, causal};
  Kokkos::parallel_for("dtw::attention_block_backward", host_range(0, heads), [=](std::int64_t bh) {
    const std::vector<T> delta = row_deltas(dout + bh * tq * d, out + bh * tq * d, tq, d);
    block_backward_head(dq + bh * tq * d, dk + bh * tk * d, dv + bh * tk * d, dout + bh * tq * d,
                        lse + bh * tq, delta.data(), q + bh * tq * d, k + bh * tk * d,
                        v + bh * tk * d, b);
  });
}

template <class T>
void attention_blockwise_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                 const AttentionShape& shape, std::int64_t block, bool causal) {
  check_blockwise("attention_blockwise_forward", shape, block, causal);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads * tq == 0) return;
  ensure_kokkos_initialized();
  const auto range = host_range(0, heads);
  Kokkos::parallel_for("dtw::attention_blockwise_forward", range, [=](std::int64_t bh) {
    T *o = out + bh * tq * d, *l = lse + bh * tq;
    // Start from "no keys seen" (out 0, lse −∞) and fold every block in.
    std::fill(o, o + tq * d, T(0));
    std::fill(l, l + tq, kMinusInf<T>);
    std::vector<T> out_b(static_cast<std::size_t>(tq * d));
    std::vector<T> lse_b(static_cast<std::size_t>(tq));
    // Causal: block_forward_head skips the rows before the block's first
    // key, which see none of it (their lse_b is −∞, a no-op to merge).
    for (std::int64_t j0 = 0; j0 < tk; j0 += block) {
      const Block b{tq, std::min(block, tk - j0), d, 0, j0, causal};
      block_forward_head(out_b.data(), lse_b.data(), q + bh * tq * d, k + (bh * tk + j0) * d,
                         v + (bh * tk + j0) * d, b);
      merge_rows(o, l, out_b.data(), lse_b.data(), tq, d);
    }
  });
}

template <class T>
void attention_blockwise_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                                  const T* q, const T* k, const T* v, const AttentionShape& shape,
                                  std::int64_t block, bool causal) {
  check_blockwise("attention_blockwise_backward", shape, block, causal);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads == 0) return;
  ensure_kokkos_initialized();
  const auto range = host_range(0, heads);
  Kokkos::parallel_for("dtw::attention_blockwise_backward", range, [=](std::int64_t bh) {
    // Gradients are overwritten here, then every block accumulates.
    std::fill(dq + bh * tq * d, dq + (bh + 1) * tq * d, T(0));
    std::fill(dk + bh * tk * d, dk + (bh + 1) * tk * d, T(0));
    std::fill(dv + bh * tk * d, dv + (bh + 1) * tk * d, T(0));
    const std::vector<T> delta = row_deltas(dout + bh * tq * d, out + bh * tq * d, tq, d);
    for (std::int64_t j0 = 0; j0 < tk; j0 += block) {
      const std::int64_t kv = (bh * tk + j0) * d;
      const Block b{tq, std::min(block, tk - j0), d, 0, j0, causal};
      block_backward_head(dq + bh * tq * d, dk + kv, dv + kv, dout + bh * tq * d, lse + bh * tq,
                          delta.data(), q + bh * tq * d, k + kv, v + kv, b);
    }
  });
}

#define DTW_INSTANTIATE(T)                                                                      \
  template void attention_block_forward<T>(T*, T*, const T*, const T*, const T*,                \
                                           const AttentionShape&, std::int64_t, std::int64_t,   \
                                           bool);                                               \
  template void attention_merge<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t);     \
  template void attention_block_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, \
                                            const T*, const T*, const AttentionShape&,          \
                                            std::int64_t, std::int64_t, bool);                  \
  template void attention_blockwise_forward<T>(T*, T*, const T*, const T*, const T*,            \
                                               const AttentionShape&, std::int64_t, bool);      \
  template void attention_blockwise_backward<T>(T*, T*, T*, const T*, const T*, const T*,       \
                                                const T*, const T*, const T*,                   \
                                                const AttentionShape&, std::int64_t, bool);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
