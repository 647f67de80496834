// Attention's forward row kernels: one thread block of kThreads per query row,
// looping over keys in tiles of kThreads so that any kv_len fits in a few KB of
// shared memory; and the merge. Sums run in a fixed order (per-thread loops,
// then a fixed tree), nothing is accumulated atomically, so results are
// bitwise reproducible. Simple, not fast: scores are recomputed rather than
// kept, and nothing uses tensor cores. Backward: attention_backward_kernels.cu.
#include <cstdint>

#include "../attention_common.h"
#include "attention_device.cuh"
#include "attention_kernels.h"

namespace dtw::kernels::cuda_detail {
namespace {
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
    for (std::int64_t j = tid; j < vis; j += kThreads)
      combine(m, l, scale * dot(qi, kh + j * d, d), T(1));
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

// (out, lse) ⊕= (out_b, lse_b), one thread per row (it reads and writes the
// row's lse, so no other thread may): as merge_rows in attention_blockwise.cpp.
// Per row 3·head_dim flops and 4·head_dim·sizeof(T) bytes.
template <class T>
__global__ void merge_kernel(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                             std::int64_t d) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += stride) {
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

}  // namespace

template <class T>
void launch_forward(T* out, T* lse, T* probs, const T* q, const T* k, const T* v, const Geometry& g,
                    cudaStream_t stream) {
  const std::int64_t rows = g.heads * g.q_len;
  if (rows == 0) return;
  forward_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(out, lse, probs, q, k, v, g,
                                                             detail::score_scale<T>(g.head_dim));
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_delta_from_probs(T* delta, const T* dout, const T* probs, const T* v, const Geometry& g,
                             cudaStream_t stream) {
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
void launch_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                  std::int64_t head_dim, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kMergeThreads = 256;
  merge_kernel<T>
      <<<blocks_for((rows + kMergeThreads - 1) / kMergeThreads), kMergeThreads, 0, stream>>>(
          out, lse, out_b, lse_b, rows, head_dim);
  DTW_CUDA_CHECK_LAUNCH();
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void launch_forward<T>(T*, T*, T*, const T*, const T*, const T*, const Geometry&,     \
                                  cudaStream_t);                                                 \
  template void launch_delta_from_probs<T>(T*, const T*, const T*, const T*, const Geometry&,    \
                                           cudaStream_t);                                        \
  template void launch_delta_from_out<T>(T*, const T*, const T*, const Geometry&, cudaStream_t); \
  template void launch_merge<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t,          \
                                cudaStream_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels::cuda_detail
