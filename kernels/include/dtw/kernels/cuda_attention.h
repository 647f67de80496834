#pragma once
/// @file
/// Attention on a CUDA device (built only where CUDA was found: DTW_HAVE_CUDA
/// in dtw/config.h): the device twins of attention.h, with its layouts,
/// scale (1/√head_dim), causal mask in global positions and edge cases (a
/// query row that sees no key has lse = −∞ and output 0).
///
/// Every function takes the host function's arguments in the same order, then
/// the stream as `void*` (a `cudaStream_t`, nullptr for the default stream) so
/// that this header needs no CUDA header. All pointers are device memory. A
/// call enqueues its kernels on the stream and returns without waiting;
/// scratch memory comes from cudaMallocAsync on the same stream. Arguments are
/// checked as the host checks them, before any CUDA call (dtw::InvalidArgument
/// naming the values, with or without a GPU); a failed launch throws
/// dtw::CudaError. No floating-point atomics: results are bitwise identical
/// from run to run on the same device.

#include <cstdint>

#include "dtw/kernels/attention.h"

namespace dtw::kernels {

/// attention_forward on the device: overwrites out and probs
/// ([batch, heads, q_len, kv_len]).
template <class T>
void device_attention_forward(T* out, T* probs, const T* q, const T* k, const T* v,
                              const AttentionShape& shape, bool causal = true,
                              void* stream = nullptr);

/// attention_backward on the device, from the saved probs: overwrites dq, dk, dv.
template <class T>
void device_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q,
                               const T* k, const T* v, const AttentionShape& shape,
                               void* stream = nullptr);

/// attention_block_forward on the device: overwrites out and lse for one key
/// block, query row i at position q_offset + i and key row j at k_offset + j.
template <class T>
void device_attention_block_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                    const AttentionShape& shape, std::int64_t q_offset,
                                    std::int64_t k_offset, bool causal = true,
                                    void* stream = nullptr);

/// attention_merge on the device: (out, lse) ⊕= (out_b, lse_b) in place for
/// `rows` rows of head_dim values; −∞ on either side is handled.
template <class T>
void device_attention_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                            std::int64_t head_dim, void* stream = nullptr);

/// attention_block_backward on the device: accumulates (+=) one key block's
/// contribution into dq, dk and dv, given the final out and lse.
template <class T>
void device_attention_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                                     const T* q, const T* k, const T* v,
                                     const AttentionShape& shape, std::int64_t q_offset,
                                     std::int64_t k_offset, bool causal = true,
                                     void* stream = nullptr);

/// attention_blockwise_forward on the device: keys in blocks of `block` rows,
/// each block's (out, lse) merged in order; overwrites out and lse.
template <class T>
void device_attention_blockwise_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                        const AttentionShape& shape, std::int64_t block,
                                        bool causal = true, void* stream = nullptr);

/// attention_blockwise_backward on the device: overwrites dq, dk, dv, then
/// adds every block's contribution in block order.
template <class T>
void device_attention_blockwise_backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                                         const T* lse, const T* q, const T* k, const T* v,
                                         const AttentionShape& shape, std::int64_t block,
                                         bool causal = true, void* stream = nullptr);

}  // namespace dtw::kernels
