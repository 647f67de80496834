#pragma once
// The row kernels behind cuda_attention.h (attention_kernels.cu), shared by
// the plain functions (attention.cu) and the blockwise ones
// (attention_blockwise.cu). Launchers take sizes already checked; each
// launches nothing when it has no rows.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "dtw/cuda_check.h"
#include "stream_scratch.cuh"

namespace dtw::kernels::cuda_detail {

// One call's view of a block of keys for every (batch, head). Query row i of
// head h is q[(h·q_len + i)·head_dim ..]; key row j is k[(h·kv_stride + j)·
// head_dim ..] (k, v, dk, dv already point at the block's first row), so a
// block of a longer sequence (kv_stride > kv_len) needs no copy. With causal,
// query i sees key j iff k_offset + j ≤ q_offset + i.
struct Geometry {
  std::int64_t heads = 0;  // batch · heads
  std::int64_t q_len = 0, kv_len = 0, head_dim = 0, kv_stride = 0;
  std::int64_t q_offset = 0, k_offset = 0;
  bool causal = false;
};

// Forward of every query row over the block. Plain (probs != nullptr):
// writes out and the probs row [q_len, kv_len] (kv_stride must be kv_len).
// Block (probs == nullptr): writes out and lse; a row seeing no key gets
// out 0 and lse −∞.
template <class T>
void launch_forward(T* out, T* lse, T* probs, const T* q, const T* k, const T* v, const Geometry& g,
                    cudaStream_t stream);

// delta[h·q_len + i] = D_i, the softmax backward's row term Σ_j P_ij dP_ij:
// from probs (plain), or as dout_i · out_i when out is the final output
// (blockwise; the same number, see attention_blockwise.cpp).
template <class T>
void launch_delta_from_probs(T* delta, const T* dout, const T* probs, const T* v, const Geometry& g,
                             cudaStream_t stream);
template <class T>
void launch_delta_from_out(T* delta, const T* dout, const T* out, const Geometry& g,
                           cudaStream_t stream);

// dq (per query row) and dk, dv (per key row of the block). Probabilities come
// from probs (plain) or are recomputed as exp(score − lse) (probs ==
// nullptr). `accumulate`: add to the gradients, else overwrite them.
template <class T>
void launch_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* lse,
                     const T* delta, const T* q, const T* k, const T* v, const Geometry& g,
                     bool accumulate, cudaStream_t stream);

// (out, lse) ⊕= (out_b, lse_b) for `rows` rows of head_dim values.
template <class T>
void launch_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                  std::int64_t head_dim, cudaStream_t stream);

}  // namespace dtw::kernels::cuda_detail
