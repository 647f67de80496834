// Blockwise attention on a CUDA device (cuda_attention.h): one key block's
// (out, lse), the log-sum-exp merge, one block's gradient, and the whole
// sequence visited block by block, as attention_blockwise.cpp does on the
// host (its comment explains the merge and the recomputation). Kernels in
// attention_kernels.cu; this file checks arguments and enqueues them.
#include <cstdint>

#include "../attention_common.h"
#include "attention_kernels.h"
#include "dtw/kernels/cuda_attention.h"

namespace dtw::kernels {

using cuda_detail::Geometry;

namespace {

void check_blockwise(const char* fn, const AttentionShape& s, std::int64_t block, bool causal) {
  detail::check_attention_shape(fn, s);
  DTW_CHECK_ARG(block > 0, fn << ": block " << block << " must be positive");
  detail::check_attention_causal(fn, s, causal);
}

// Keys [j0, j0 + len) of sequences kv_stride rows long, at the given positions.
Geometry block_geometry(const AttentionShape& s, std::int64_t kv_len, std::int64_t kv_stride,
                        std::int64_t q_offset, std::int64_t k_offset, bool causal) {
  Geometry g;
  g.heads = s.batch * s.heads;
  g.q_len = s.q_len;
  g.kv_len = kv_len;
  g.kv_stride = kv_stride;
  g.head_dim = s.head_dim;
  g.q_offset = q_offset;
  g.k_offset = k_offset;
  g.causal = causal;
  return g;
}

}  // namespace

template <class T>
void device_attention_block_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                    const AttentionShape& shape, std::int64_t q_offset,
                                    std::int64_t k_offset, bool causal, void* stream) {
  detail::check_attention_shape("device_attention_block_forward", shape);
  if (shape.batch * shape.heads * shape.q_len == 0) return;
  const Geometry g = block_geometry(shape, shape.kv_len, shape.kv_len, q_offset, k_offset, causal);
  cuda_detail::launch_forward<T>(out, lse, nullptr, q, k, v, g, static_cast<cudaStream_t>(stream));
}

template <class T>
void device_attention_merge(T* out, T* lse, const T* out_b, const T* lse_b, std::int64_t rows,
                            std::int64_t head_dim, void* stream) {
  DTW_CHECK_ARG(rows >= 0 && head_dim >= 0,
                "device_attention_merge: sizes must not be negative (rows " << rows << ", head_dim "
                                                                            << head_dim << ")");
  cuda_detail::launch_merge<T>(out, lse, out_b, lse_b, rows, head_dim,
                               static_cast<cudaStream_t>(stream));
}

template <class T>
void device_attention_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                                     const T* q, const T* k, const T* v,
                                     const AttentionShape& shape, std::int64_t q_offset,
                                     std::int64_t k_offset, bool causal, void* stream) {
  detail::check_attention_shape("device_attention_block_backward", shape);
  const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
  // Accumulates: with no query row or no key there is nothing to add.
  if (rows == 0 || shape.kv_len == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  const Geometry g = block_geometry(shape, shape.kv_len, shape.kv_len, q_offset, k_offset, causal);
  cuda_detail::StreamScratch<T> delta(rows, st);
  cuda_detail::launch_delta_from_out<T>(delta.get(), dout, out, g, st);
  cuda_detail::launch_backward<T>(dq, dk, dv, dout, nullptr, lse, delta.get(), q, k, v, g, true,
                                  st);
}

template <class T>
void device_attention_blockwise_forward(T* out, T* lse, const T* q, const T* k, const T* v,
                                        const AttentionShape& shape, std::int64_t block,
                                        bool causal, void* stream) {
  check_blockwise("device_attention_blockwise_forward", shape, block, causal);
  const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
  const std::int64_t tk = shape.kv_len, d = shape.head_dim;
  if (rows == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  // The first block writes (out, lse) directly: the host merges it into
  // (0, −∞), which copies it. With kv_len 0 this "block" is empty and gives
  // out 0, lse −∞ as the host's initial values.
  const std::int64_t first = block < tk ? block : tk;
  cuda_detail::launch_forward<T>(out, lse, nullptr, q, k, v,
                                 block_geometry(shape, first, tk, 0, 0, causal), st);
  if (first == tk) return;
  cuda_detail::StreamScratch<T> out_b(rows * d, st), lse_b(rows, st);
  for (std::int64_t j0 = first; j0 < tk; j0 += block) {
    const std::int64_t len = tk - j0 < block ? tk - j0 : block;
    cuda_detail::launch_forward<T>(out_b.get(), lse_b.get(), nullptr, q, k + j0 * d, v + j0 * d,
                                   block_geometry(shape, len, tk, 0, j0, causal), st);
    cuda_detail::launch_merge<T>(out, lse, out_b.get(), lse_b.get(), rows, d, st);
  }
}

template <class T>
void device_attention_blockwise_backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                                         const T* lse, const T* q, const T* k, const T* v,
                                         const AttentionShape& shape, std::int64_t block,
                                         bool causal, void* stream) {
  check_blockwise("device_attention_blockwise_backward", shape, block, causal);
  const std::int64_t heads = shape.batch * shape.heads, tq = shape.q_len, tk = shape.kv_len;
  const std::int64_t d = shape.head_dim;
  if (heads == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  // Overwritten, then every block adds its share (all-zero bytes are +0.0).
  const auto clear = [st](T* p, std::int64_t n) {
    if (n > 0) DTW_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<std::size_t>(n) * sizeof(T), st));
  };
  clear(dq, heads * tq * d);
  clear(dk, heads * tk * d);
  clear(dv, heads * tk * d);
  if (tq == 0 || tk == 0) return;
  cuda_detail::StreamScratch<T> delta(heads * tq, st);
  cuda_detail::launch_delta_from_out<T>(delta.get(), dout, out,
                                        block_geometry(shape, tk, tk, 0, 0, causal), st);
  // Blocks in order, so dq's sum over them is the same on every run.
  for (std::int64_t j0 = 0; j0 < tk; j0 += block) {
    const std::int64_t len = tk - j0 < block ? tk - j0 : block, at = j0 * d;
    cuda_detail::launch_backward<T>(dq, dk + at, dv + at, dout, nullptr, lse, delta.get(), q,
                                    k + at, v + at, block_geometry(shape, len, tk, 0, j0, causal),
                                    true, st);
  }
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void device_attention_block_forward<T>(T*, T*, const T*, const T*, const T*,           \
                                                  const AttentionShape&, std::int64_t,            \
                                                  std::int64_t, bool, void*);                     \
  template void device_attention_merge<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t, \
                                          void*);                                                 \
  template void device_attention_block_backward<T>(                                               \
      T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,                     \
      const AttentionShape&, std::int64_t, std::int64_t, bool, void*);                            \
  template void device_attention_blockwise_forward<T>(                                            \
      T*, T*, const T*, const T*, const T*, const AttentionShape&, std::int64_t, bool, void*);    \
  template void device_attention_blockwise_backward<T>(                                           \
      T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,                     \
      const AttentionShape&, std::int64_t, bool, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
