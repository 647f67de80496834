// Plain (materialised) multi-head attention, next to the loops it must match.
//
// Per (batch, head) the work is three GEMMs forward and four backward, all
// through matmul; only the masked softmax and its backward are loops here.
// Heads are independent, so one parallel_for over batch·heads needs no
// synchronisation: each iteration writes only its own slices and owns its
// scratch.
#include "dtw/kernels/attention.h"

#include <algorithm>
#include <cmath>
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

// One head: scores S = scale · q kᵀ straight into probs, the masked softmax
// in place, then out = P v.
template <class T>
void forward_head(T* out, T* p, const T* q, const T* k, const T* v, std::int64_t tq,
                  std::int64_t tk, std::int64_t d, bool causal) {
  matmul(Trans::kNo, Trans::kYes, tq, tk, d, score_scale<T>(d), q, k, T(0), p);
  for (std::int64_t i = 0; i < tq; ++i) {
    T* row = p + i * tk;
    // Causal: query i sees keys 0..i; the rest get probability exactly 0,
    // which also makes them drop out of every backward product.
    const std::int64_t visible = causal ? i + 1 : tk;
    // Subtracting the row maximum keeps exp from overflowing; it cancels in the ratio.
    const T max = visible > 0 ? detail::row_max(row, visible) : T(0);
    // vector_exp.h's exp (vectorised in float), summed in double.
    const double sum = detail::exp_shifted_sum(row, row, max, visible);
    const T inv = static_cast<T>(1.0 / sum);  // one division per row, then products
    for (std::int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (std::int64_t j = visible; j < tk; ++j) row[j] = T(0);
  }
  matmul(Trans::kNo, Trans::kNo, tq, d, tk, T(1), p, v, T(0), out);
}

}  // namespace

template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v,
                       const AttentionShape& shape, bool causal) {
  check_attention_shape("attention_forward", shape);
  check_attention_causal("attention_forward", shape, causal);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads * tq == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::attention_forward", host_range(0, heads), [=](std::int64_t bh) {
    forward_head(out + bh * tq * d, probs + bh * tq * tk, q + bh * tq * d, k + bh * tk * d,
                 v + bh * tk * d, tq, tk, d, causal);
  });
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
                        const T* v, const AttentionShape& shape) {
  check_attention_shape("attention_backward", shape);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads == 0) return;
  ensure_kokkos_initialized();
  const T scale = score_scale<T>(d);
  Kokkos::parallel_for("dtw::attention_backward", host_range(0, heads), [=](std::int64_t bh) {
    const T* p = probs + bh * tq * tk;
    const T* go = dout + bh * tq * d;
    const T *qh = q + bh * tq * d, *kh = k + bh * tk * d, *vh = v + bh * tk * d;
    // out = P V  ⇒  dV = Pᵀ dO  and  dP = dO Vᵀ.
    matmul(Trans::kYes, Trans::kNo, tk, d, tq, T(1), p, go, T(0), dv + bh * tk * d);
    std::vector<T> ds(static_cast<std::size_t>(tq * tk));
    matmul(Trans::kNo, Trans::kYes, tq, tk, d, T(1), go, vh, T(0), ds.data());
    // Softmax backward, row by row: dS = P ∘ (dP − D) with D_i = Σ_j P_ij dP_ij
    // (which equals dO_i · out_i: attention_blockwise.cpp relies on that).
    for (std::int64_t i = 0; i < tq; ++i) {
      const T* prow = p + i * tk;
      T* row = ds.data() + i * tk;
      T dot = 0;
      for (std::int64_t j = 0; j < tk; ++j) dot += prow[j] * row[j];
      for (std::int64_t j = 0; j < tk; ++j) row[j] = prow[j] * (row[j] - dot);
    }
    // S = scale · Q Kᵀ  ⇒  dQ = scale · dS K  and  dK = scale · dSᵀ Q.
    matmul(Trans::kNo, Trans::kNo, tq, d, tk, scale, ds.data(), kh, T(0), dq + bh * tq * d);
    matmul(Trans::kYes, Trans::kNo, tk, d, tq, scale, ds.data(), qh, T(0), dk + bh * tk * d);
  });
}

// ---- references: every sum written out, accumulated in double --------------

template <class T>
void attention_forward_reference(T* out, T* probs, const T* q, const T* k, const T* v,
                                 const AttentionShape& shape, bool causal) {
  check_attention_shape("attention_forward_reference", shape);
  check_attention_causal("attention_forward_reference", shape, causal);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const double scale = d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
  std::vector<double> score(static_cast<std::size_t>(tk));
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    for (std::int64_t i = 0; i < tq; ++i) {
      const T* qi = q + (bh * tq + i) * d;
      double max = -INFINITY;
      for (std::int64_t j = 0; j < tk; ++j) {
        const T* kj = k + (bh * tk + j) * d;
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
        const bool masked = causal && j > i;
        score[j] = masked ? -INFINITY : dot * scale;
        max = std::max(max, score[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < tk; ++j) sum += std::exp(score[j] - max);
      T* prow = probs + (bh * tq + i) * tk;
      for (std::int64_t j = 0; j < tk; ++j) score[j] = std::exp(score[j] - max) / sum;
      for (std::int64_t j = 0; j < tk; ++j) prow[j] = static_cast<T>(score[j]);
      for (std::int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < tk; ++j) acc += score[j] * v[(bh * tk + j) * d + c];
        out[(bh * tq + i) * d + c] = static_cast<T>(acc);
      }
    }
  }
}

template <class T>
void attention_backward_reference(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q,
                                  const T* k, const T* v, const AttentionShape& shape) {
  check_attention_shape("attention_backward_reference", shape);
  const std::int64_t tq = shape.q_len, tk = shape.kv_len, d = shape.head_dim;
  const double scale = d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
  const auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  std::vector<double> dp(sz(tk)), gq(sz(tq * d)), gk(sz(tk * d)), gv(sz(tk * d));
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    const T *qh = q + bh * tq * d, *kh = k + bh * tk * d, *vh = v + bh * tk * d;
    const T* go = dout + bh * tq * d;
    std::fill(gq.begin(), gq.end(), 0.0);
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (std::int64_t i = 0; i < tq; ++i) {
      const T* prow = probs + (bh * tq + i) * tk;
      // dP_ij = dO_i · V_j, and the softmax Jacobian's row term Σ_j P_ij dP_ij.
      double row_dot = 0;
      for (std::int64_t j = 0; j < tk; ++j) {
        dp[sz(j)] = 0;
        for (std::int64_t c = 0; c < d; ++c) dp[sz(j)] += double(go[i * d + c]) * vh[j * d + c];
        row_dot += prow[j] * dp[sz(j)];
      }
      for (std::int64_t j = 0; j < tk; ++j) {
        const double g = prow[j] * (dp[sz(j)] - row_dot) * scale;  // dL/d(q_i·k_j)
        for (std::int64_t c = 0; c < d; ++c) {
          gv[sz(j * d + c)] += prow[j] * double(go[i * d + c]);
          gq[sz(i * d + c)] += g * kh[j * d + c];
          gk[sz(j * d + c)] += g * qh[i * d + c];
        }
      }
    }
    std::transform(gq.begin(), gq.end(), dq + bh * tq * d, [](double x) { return T(x); });
    std::transform(gk.begin(), gk.end(), dk + bh * tk * d, [](double x) { return T(x); });
    std::transform(gv.begin(), gv.end(), dv + bh * tk * d, [](double x) { return T(x); });
  }
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&, \
                                     bool);                                                       \
  template void attention_forward_reference<T>(T*, T*, const T*, const T*, const T*,              \
                                               const AttentionShape&, bool);                      \
  template void attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,         \
                                      const T*, const AttentionShape&);                           \
  template void attention_backward_reference<T>(T*, T*, T*, const T*, const T*, const T*,         \
                                                const T*, const T*, const AttentionShape&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
