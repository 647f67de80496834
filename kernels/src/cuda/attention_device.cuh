#pragma once
// Device helpers of the attention row kernels (attention_kernels.cu,
// attention_backward_kernels.cu): block size, exp/log by type, the causal
// visibility of a pair, a fixed-order block sum and the online-softmax pair.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention_kernels.h"

namespace dtw::kernels::cuda_detail {

inline constexpr int kThreads = 128;  // a power of two: the reduction trees halve it
// Row kernels loop over rows with a stride of gridDim.x, so any row count fits.
inline constexpr std::int64_t kMaxBlocks = 1 << 20;

inline int blocks_for(std::int64_t rows) {
  return static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// expf/logf/log1pf for float: full precision without double arithmetic.
template <class T>
__device__ inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return exp(x);
}
template <class T>
__device__ inline T log_of(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x);
  else return log(x);
}
template <class T>
__device__ inline T log1p_of(T x) {
  if constexpr (std::is_same_v<T, float>) return log1pf(x);
  else return log1p(x);
}

template <class T>
__device__ inline T minus_inf() {
  return -static_cast<T>(INFINITY);
}

template <class T>
__device__ inline T dot(const T* a, const T* b, std::int64_t n) {
  T sum = 0;
  for (std::int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// Keys 0..visible−1 of the block are seen by query row i; rows from
// first_query(j) on see key j (both from k_offset + j ≤ q_offset + i).
__device__ inline std::int64_t visible_keys(const Geometry& g, std::int64_t i) {
  if (!g.causal) return g.kv_len;
  const std::int64_t n = g.q_offset + i - g.k_offset + 1;
  return n < 0 ? 0 : (n > g.kv_len ? g.kv_len : n);
}
__device__ inline std::int64_t first_query(const Geometry& g, std::int64_t j) {
  if (!g.causal) return 0;
  const std::int64_t i = g.k_offset + j - g.q_offset;
  return i < 0 ? 0 : (i > g.q_len ? g.q_len : i);
}

// Σ of every thread's x, returned to all threads. Called by the whole block
// (never under a divergent branch); ends with a barrier so `shared` may be
// reused at once.
template <class T>
__device__ T block_sum(T x, T* shared) {
  shared[threadIdx.x] = x;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) shared[threadIdx.x] += shared[threadIdx.x + w];
    __syncthreads();
  }
  const T sum = shared[0];
  __syncthreads();
  return sum;
}

// (m, l) ⊕= (m2, l2) where l is Σ e^{s − m}: the online-softmax pair. m = −∞
// (no score seen) is handled first, as −∞ − (−∞) would be NaN.
template <class T>
__device__ void combine(T& m, T& l, T m2, T l2) {
  if (m2 == minus_inf<T>()) return;
  if (m == minus_inf<T>()) {
    m = m2;
    l = l2;
    return;
  }
  const T hi = m > m2 ? m : m2;
  l = l * exp_of(m - hi) + l2 * exp_of(m2 - hi);
  m = hi;
}

}  // namespace dtw::kernels::cuda_detail
