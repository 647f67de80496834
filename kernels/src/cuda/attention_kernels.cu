// Attention's row kernels: one thread block of kThreads per query row (forward,
// delta, dq) or per key row (dk, dv), looping over the other side in tiles of
// kThreads rows so that any kv_len or q_len fits in a few KB of shared memory.
// Sums run in a fixed order (per-thread loops, then a fixed tree), and nothing
// is accumulated atomically, so results are bitwise reproducible. Simple, not
// fast: scores are recomputed rather than kept, and nothing uses tensor cores.
#include <cmath>
#include <cstdint>

#include "../attention_common.h"
#include "attention_kernels.h"

namespace dtw::kernels::cuda_detail {
namespace {

constexpr int kThreads = 128;  // a power of two: the reduction trees halve it
// Row kernels loop over rows with a stride of gridDim.x, so any row count fits.
constexpr std::int64_t kMaxBlocks = 1 << 20;

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }
__device__ inline float log1p_of(float x) { return log1pf(x); }
__device__ inline double log1p_of(double x) { return log1p(x); }

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

// Forward, one block per query row r = h·q_len + i. Pass 1: each thread takes
// keys tid, tid + kThreads, ... and keeps the online (max, Σ e^{s−max}) of
// their scores; a tree combines the pairs. Pass 2, per tile of kThreads keys:
// thread t recomputes the score of key t of the tile, stores p = e^{s−max}/Σ
// in shared memory (and in probs), then thread t owns output columns t,
// t + kThreads, ... and adds Σ_tile p_j v_jc. Per row ~6·vis·head_dim flops;
// k read twice and v once (3·vis·head_dim·sizeof(T) bytes, mostly from L2).
template <class T>
__global__ void __launch_bounds__(kThreads)
    forward_rows(T* out, T* lse, T* probs, const T* q, const T* k, const T* v, Geometry g,
                 T scale) {
  __shared__ T red_m[kThreads], red_l[kThreads], tile[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t d = g.head_dim, rows = g.heads * g.q_len;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t h = r / g.q_len, i = r % g.q_len, vis = visible_keys(g, i);
    const T* qi = q + r * d;
    const T* kh = k + h * g.kv_stride * d;
    const T* vh = v + h * g.kv_stride * d;
    T* o = out + r * d;
    for (std::int64_t c = tid; c < d; c += kThreads) o[c] = 0;  // each thread its own columns
    if (probs)
      for (std::int64_t j = vis + tid; j < g.kv_len; j += kThreads) probs[r * g.kv_len + j] = 0;
    if (vis == 0) {  // uniform over the block: vis depends on the row only
      if (lse && tid == 0) lse[r] = minus_inf<T>();
      continue;
    }
    T m = minus_inf<T>(), l = 0;
    for (std::int64_t j = tid; j < vis; j += kThreads) combine(m, l, scale * dot(qi, kh + j * d, d), T(1));
    red_m[tid] = m;
    red_l[tid] = l;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (tid < w) combine(red_m[tid], red_l[tid], red_m[tid + w], red_l[tid + w]);
      __syncthreads();
    }
    const T row_max = red_m[0], row_sum = red_l[0];  // vis ≥ 1: the max is finite, the sum ≥ 1
    for (std::int64_t t0 = 0; t0 < vis; t0 += kThreads) {
      const std::int64_t n = vis - t0 < kThreads ? vis - t0 : kThreads;
      if (tid < n) {
        const std::int64_t j = t0 + tid;
        const T p = exp_of(scale * dot(qi, kh + j * d, d) - row_max) / row_sum;
        tile[tid] = p;
        if (probs) probs[r * g.kv_len + j] = p;
      }
      __syncthreads();
      for (std::int64_t c = tid; c < d; c += kThreads) {
        T acc = 0;
        for (std::int64_t jj = 0; jj < n; ++jj) acc += tile[jj] * vh[(t0 + jj) * d + c];
        o[c] += acc;
      }
      __syncthreads();  // tile, red_m, red_l are rewritten by the next tile or row
    }
    if (lse && tid == 0) lse[r] = row_max + log_of(row_sum);
  }
}

// D_i per query row, one block per row: Σ_j P_ij (dout_i · v_j) with threads
// over keys (plain; 2·kv_len·head_dim flops), or dout_i · out_i with threads
// over columns (blockwise; 2·head_dim flops). A tree sums the threads.
template <class T>
__global__ void __launch_bounds__(kThreads)
    delta_rows(T* delta, const T* dout, const T* probs, const T* out, const T* v, Geometry g) {
  __shared__ T red[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t d = g.head_dim, rows = g.heads * g.q_len;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* go = dout + r * d;
    T x = 0;
    if (probs) {
      const T* vh = v + (r / g.q_len) * g.kv_stride * d;
      for (std::int64_t j = tid; j < g.kv_len; j += kThreads)
        x += probs[r * g.kv_len + j] * dot(go, vh + j * d, d);
    } else {
      for (std::int64_t c = tid; c < d; c += kThreads) x += go[c] * out[r * d + c];
    }
    const T sum = block_sum(x, red);
    if (tid == 0) delta[r] = sum;
  }
}

// The probability of (query row r of head h, key j), from probs or recomputed
// from the final lse (for a pair the mask lets through).
template <class T>
__device__ inline T probability(const T* probs, const T* lse, const T* qi, const T* kj,
                                std::int64_t r, std::int64_t j, const Geometry& g, T scale) {
  if (probs) return probs[r * g.kv_len + j];
  return exp_of(scale * dot(qi, kj, g.head_dim) - lse[r]);
}

// dq, one block per query row: per tile of kThreads visible keys, thread t
// forms dS_ij = P_ij (dout_i · v_j − D_i) in shared memory, then thread t owns
// columns t, t + kThreads, ... and adds scale · Σ_tile dS_ij k_jc. Per row
// ~6·vis·head_dim flops; k read twice (once when P is recomputed), v once.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dq_rows(T* dq, const T* dout, const T* probs, const T* lse, const T* delta, const T* q,
            const T* k, const T* v, Geometry g, T scale, bool accumulate) {
  __shared__ T tile[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t d = g.head_dim, rows = g.heads * g.q_len;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t h = r / g.q_len, vis = visible_keys(g, r % g.q_len);
    const T *qi = q + r * d, *go = dout + r * d;
    const T* kh = k + h * g.kv_stride * d;
    const T* vh = v + h * g.kv_stride * d;
    T* gq = dq + r * d;
    if (!accumulate)
      for (std::int64_t c = tid; c < d; c += kThreads) gq[c] = 0;
    for (std::int64_t t0 = 0; t0 < vis; t0 += kThreads) {
      const std::int64_t n = vis - t0 < kThreads ? vis - t0 : kThreads;
      if (tid < n) {
        const std::int64_t j = t0 + tid;
        const T p = probability(probs, lse, qi, kh + j * d, r, j, g, scale);
        tile[tid] = p * (dot(go, vh + j * d, d) - delta[r]);
      }
      __syncthreads();
      for (std::int64_t c = tid; c < d; c += kThreads) {
        T acc = 0;
        for (std::int64_t jj = 0; jj < n; ++jj) acc += tile[jj] * kh[(t0 + jj) * d + c];
        gq[c] += scale * acc;
      }
      __syncthreads();
    }
  }
}

// dk and dv, one block per key row r = h·kv_len + j of the block: per tile of
// kThreads query rows that see key j, thread t forms P_ij and dS_ij in shared
// memory, then thread t owns columns t, t + kThreads, ... and adds
// Σ_tile P_ij dout_ic to dv and scale · Σ_tile dS_ij q_ic to dk. Query rows
// are visited in order, so the sum over them is fixed (no atomics). Per key
// row ~8·q_len·head_dim flops.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dkdv_rows(T* dk, T* dv, const T* dout, const T* probs, const T* lse, const T* delta,
              const T* q, const T* k, const T* v, Geometry g, T scale, bool accumulate) {
  __shared__ T tile_p[kThreads], tile_ds[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t d = g.head_dim, rows = g.heads * g.kv_len;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t h = r / g.kv_len, j = r % g.kv_len, row0 = h * g.q_len;
    const std::int64_t at = (h * g.kv_stride + j) * d;
    const T *kj = k + at, *vj = v + at, *qh = q + row0 * d, *goh = dout + row0 * d;
    T *gk = dk + at, *gv = dv + at;
    if (!accumulate)
      for (std::int64_t c = tid; c < d; c += kThreads) gk[c] = gv[c] = 0;
    for (std::int64_t t0 = first_query(g, j); t0 < g.q_len; t0 += kThreads) {
      const std::int64_t n = g.q_len - t0 < kThreads ? g.q_len - t0 : kThreads;
      if (tid < n) {
        const std::int64_t i = t0 + tid;
        const T p = probability(probs, lse, qh + i * d, kj, row0 + i, j, g, scale);
        tile_p[tid] = p;
        tile_ds[tid] = p * (dot(goh + i * d, vj, d) - delta[row0 + i]);
      }
      __syncthreads();
      for (std::int64_t c = tid; c < d; c += kThreads) {
        T acc_v = 0, acc_k = 0;
        for (std::int64_t ii = 0; ii < n; ++ii) {
          acc_v += tile_p[ii] * goh[(t0 + ii) * d + c];
          acc_k += tile_ds[ii] * qh[(t0 + ii) * d + c];
        }
        gv[c] += acc_v;
        gk[c] += scale * acc_k;
      }
      __syncthreads();
    }
  }
}

// (out, lse) ⊕= (out_b, lse_b), one thread per row (it reads and writes the
// row's lse, so no other thread may): as merge_rows in attention_blockwise.cpp.
// Per row 3·head_dim flops and 4·head_dim·sizeof(T) bytes.
template <class T>
__global__ void merge_kernel(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                             std::int64_t d) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       r < rows; r += stride) {
    const T a = lse[r], b = lse_b[r];
    T* o = out + r * d;
    const T* ob = out_b + r * d;
    if (b == minus_inf<T>()) continue;  // no mass on the b side
    if (a == minus_inf<T>()) {
      for (std::int64_t c = 0; c < d; ++c) o[c] = ob[c];
      lse[r] = b;
      continue;
    }
    const T hi = a > b ? a : b, lo = a > b ? b : a;
    const T merged = hi + log1p_of(exp_of(lo - hi));
    const T w = exp_of(a - merged), wb = exp_of(b - merged);
    for (std::int64_t c = 0; c < d; ++c) o[c] = w * o[c] + wb * ob[c];
    lse[r] = merged;
  }
}

int blocks_for(std::int64_t rows) { return static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks); }

}  // namespace

template <class T>
void launch_forward(T* out, T* lse, T* probs, const T* q, const T* k, const T* v,
                    const Geometry& g, cudaStream_t stream) {
  const std::int64_t rows = g.heads * g.q_len;
  if (rows == 0) return;
  forward_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(out, lse, probs, q, k, v, g,
                                                             detail::score_scale<T>(g.head_dim));
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_delta_from_probs(T* delta, const T* dout, const T* probs, const T* v,
                             const Geometry& g, cudaStream_t stream) {
  const std::int64_t rows = g.heads * g.q_len;
  if (rows == 0) return;
  delta_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(delta, dout, probs, nullptr, v, g);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_delta_from_out(T* delta, const T* dout, const T* out, const Geometry& g,
                           cudaStream_t stream) {
  const std::int64_t rows = g.heads * g.q_len;
  if (rows == 0) return;
  delta_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(delta, dout, nullptr, out, nullptr, g);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* lse,
                     const T* delta, const T* q, const T* k, const T* v, const Geometry& g,
                     bool accumulate, cudaStream_t stream) {
  const T scale = detail::score_scale<T>(g.head_dim);
  if (const std::int64_t rows = g.heads * g.q_len; rows > 0) {
    dq_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(dq, dout, probs, lse, delta, q, k, v, g,
                                                          scale, accumulate);
    DTW_CUDA_CHECK_LAUNCH();
  }
  if (const std::int64_t rows = g.heads * g.kv_len; rows > 0) {
    dkdv_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(dk, dv, dout, probs, lse, delta, q, k,
                                                            v, g, scale, accumulate);
    DTW_CUDA_CHECK_LAUNCH();
  }
}

template <class T>
void launch_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                  std::int64_t head_dim, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kMergeThreads = 256;
  merge_kernel<T><<<blocks_for((rows + kMergeThreads - 1) / kMergeThreads), kMergeThreads, 0,
                    stream>>>(out, lse, out_b, lse_b, rows, head_dim);
  DTW_CUDA_CHECK_LAUNCH();
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void launch_forward<T>(T*, T*, T*, const T*, const T*, const T*, const Geometry&,     \
                                  cudaStream_t);                                                 \
  template void launch_delta_from_probs<T>(T*, const T*, const T*, const T*, const Geometry&,    \
                                           cudaStream_t);                                        \
  template void launch_delta_from_out<T>(T*, const T*, const T*, const Geometry&, cudaStream_t); \
  template void launch_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, \
                                   const T*, const T*, const Geometry&, bool, cudaStream_t);     \
  template void launch_merge<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t,          \
                                cudaStream_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels::cuda_detail
