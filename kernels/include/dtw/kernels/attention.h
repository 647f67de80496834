#pragma once
/// @file
/// Causal multi-head attention, forward and backward, in two forms.
///
/// Layout: q is [batch, heads, q_len, head_dim], k and v are
/// [batch, heads, kv_len, head_dim], the output is shaped like q; all
/// row-major and contiguous. Scores are scaled by 1/√head_dim.
///
/// *Plain* attention materialises the probabilities [batch, heads, q_len,
/// kv_len] and keeps them for the backward pass. *Blockwise* attention sees
/// one block of keys and values at a time and keeps, per query row, only the
/// output so far and the log-sum-exp (lse) of its scores; two partial results
/// over disjoint key blocks merge exactly (attention_merge). This is what ring
/// attention and Ulysses build on: each rank holds a block of the sequence.
///
/// Positions: query row i sits at global position `q_offset + i`, key row j
/// at `k_offset + j`; with `causal`, a query attends to a key iff the key's
/// position is ≤ the query's. A query row that sees no key in a block has
/// lse = −∞ and output 0 for that block. Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// Sizes of one attention call.
struct AttentionShape {
  std::int64_t batch = 1;     ///< independent sequences
  std::int64_t heads = 1;     ///< attention heads (per rank, when heads are split)
  std::int64_t q_len = 0;     ///< query rows per (batch, head)
  std::int64_t kv_len = 0;    ///< key/value rows per (batch, head)
  std::int64_t head_dim = 0;  ///< features per head (the scores are scaled by 1/√head_dim)
};

/// Plain attention: `probs = softmax(q kᵀ/√d + mask)`, `out = probs v`.
/// probs is [batch, heads, q_len, kv_len]. Positions start at 0 for both q
/// and k (q_len must equal kv_len when causal).
template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v,
                       const AttentionShape& shape, bool causal = true);
/// attention_forward as plain loops: the reference the kernel is tested against.
template <class T>
void attention_forward_reference(T* out, T* probs, const T* q, const T* k, const T* v,
                                 const AttentionShape& shape, bool causal = true);

/// Gradients of plain attention from the saved probs; overwrites dq, dk, dv.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
                        const T* v, const AttentionShape& shape);
/// attention_backward as plain loops: the reference the kernel is tested against.
template <class T>
void attention_backward_reference(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q,
                                  const T* k, const T* v, const AttentionShape& shape);

/// Attention of q over one block of keys and values: overwrites out
/// ([batch, heads, q_len, head_dim]) and lse ([batch, heads, q_len]).
template <class T>
void attention_block_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& shape, std::int64_t q_offset,
                             std::int64_t k_offset, bool causal = true);

/// Merges the partial result (out_b, lse_b) into (out, lse), in place, for
/// `rows` query rows of head_dim values: `lse' = log(e^lse + e^lse_b)` and
/// `out' = e^(lse−lse') out + e^(lse_b−lse') out_b`. Exact up to rounding, in
/// any order of blocks; −∞ on either side is handled.
template <class T>
void attention_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                     std::int64_t head_dim);

/// Gradient contribution of one key/value block, given the *final* out and lse
/// of every query row (after all blocks were merged) and dout. Accumulates
/// (+=) into dq, dk and dv, since the gradient of q sums over key blocks and
/// that of a key block over query blocks. Recomputes the probabilities of the
/// block as exp(score − lse): nothing of size q_len×kv_len is kept between
/// passes.
template <class T>
void attention_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                              const T* q, const T* k, const T* v, const AttentionShape& shape,
                              std::int64_t q_offset, std::int64_t k_offset, bool causal = true);

/// Whole causal attention computed blockwise on one rank: keys and values are
/// visited in blocks of `block` rows and merged. Same result as
/// attention_forward (up to rounding), without the probs matrix.
template <class T>
void attention_blockwise_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                 const AttentionShape& shape, std::int64_t block,
                                 bool causal = true);

/// Backward of attention_blockwise_forward; overwrites dq, dk, dv.
template <class T>
void attention_blockwise_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                                  const T* q, const T* k, const T* v, const AttentionShape& shape,
                                  std::int64_t block, bool causal = true);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_attention.h) on the Place's device and stream ----

/// attention_forward on `at`: the host kernel, or device_attention_forward on at's stream.
template <class T>
void attention_forward(const Place& at, T* out, T* probs, const T* q, const T* k, const T* v,
                       const AttentionShape& shape, bool causal = true);

/// attention_backward on `at`: the host kernel, or device_attention_backward on at's stream.
template <class T>
void attention_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* probs,
                        const T* q, const T* k, const T* v, const AttentionShape& shape);

/// attention_block_forward on `at`: the host kernel, or device_attention_block_forward on at's
/// stream.
template <class T>
void attention_block_forward(const Place& at, T* out, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& shape, std::int64_t q_offset,
                             std::int64_t k_offset, bool causal = true);

/// attention_merge on `at`: the host kernel, or device_attention_merge on at's stream.
template <class T>
void attention_merge(const Place& at, T* out, T* lse, const T* out_b, const T* lse_b,
                     std::int64_t rows, std::int64_t head_dim);

/// attention_block_backward on `at`: the host kernel, or device_attention_block_backward on at's
/// stream.
template <class T>
void attention_block_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* out,
                              const T* lse, const T* q, const T* k, const T* v,
                              const AttentionShape& shape, std::int64_t q_offset,
                              std::int64_t k_offset, bool causal = true);

/// attention_blockwise_forward on `at`: the host kernel, or device_attention_blockwise_forward on
/// at's stream.
template <class T>
void attention_blockwise_forward(const Place& at, T* out, T* lse, const T* q, const T* k,
                                 const T* v, const AttentionShape& shape, std::int64_t block,
                                 bool causal = true);

/// attention_blockwise_backward on `at`: the host kernel, or device_attention_blockwise_backward on
/// at's stream.
template <class T>
void attention_blockwise_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* out,
                                  const T* lse, const T* q, const T* k, const T* v,
                                  const AttentionShape& shape, std::int64_t block,
                                  bool causal = true);

}  // namespace dtw::kernels
