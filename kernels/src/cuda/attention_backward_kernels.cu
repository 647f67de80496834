// Attention's backward row kernels: dq with one thread block of kThreads per
// query row, dk and dv with one per key row, each looping over the other side
// in tiles of kThreads rows (any length fits in a few KB of shared memory).
// Each gradient element is owned by one thread and summed in a fixed order:
// no atomics, bitwise reproducible.
#include <cstdint>

#include "../attention_common.h"
#include "attention_device.cuh"
#include "attention_kernels.h"

namespace dtw::kernels::cuda_detail {
namespace {

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
    dkdv_rows(T* dk, T* dv, const T* dout, const T* probs, const T* lse, const T* delta, const T* q,
              const T* k, const T* v, Geometry g, T scale, bool accumulate) {
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

}  // namespace

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

#define DTW_INSTANTIATE(T)                                                                       \
  template void launch_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, \
                                   const T*, const T*, const Geometry&, bool, cudaStream_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels::cuda_detail
