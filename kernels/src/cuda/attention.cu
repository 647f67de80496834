// Plain attention on a CUDA device (cuda_attention.h): the probabilities are
// materialised as on the host, and the backward starts from them. The kernels
// are in attention_kernels.cu; this file checks the arguments as the host
// does and enqueues them.
#include <cstdint>

#include "../attention_common.h"
#include "attention_kernels.h"
#include "dtw/kernels/cuda_attention.h"

namespace dtw::kernels {

using cuda_detail::Geometry;

namespace {

// Plain attention: one block of every key, positions from 0, rows contiguous.
Geometry plain_geometry(const AttentionShape& s, bool causal) {
  Geometry g;
  g.heads = s.batch * s.heads;
  g.q_len = s.q_len;
  g.kv_len = g.kv_stride = s.kv_len;
  g.head_dim = s.head_dim;
  g.causal = causal;
  return g;
}

}  // namespace

template <class T>
void device_attention_forward(T* out, T* probs, const T* q, const T* k, const T* v,
                              const AttentionShape& shape, bool causal, void* stream) {
  detail::check_attention_shape("device_attention_forward", shape);
  detail::check_attention_causal("device_attention_forward", shape, causal);
  if (shape.batch * shape.heads * shape.q_len == 0) return;
  cuda_detail::launch_forward<T>(out, nullptr, probs, q, k, v, plain_geometry(shape, causal),
                                 static_cast<cudaStream_t>(stream));
}

template <class T>
void device_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q,
                               const T* k, const T* v, const AttentionShape& shape, void* stream) {
  detail::check_attention_shape("device_attention_backward", shape);
  const std::int64_t heads = shape.batch * shape.heads;
  if (heads == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  // The mask is already in probs (zeros), so every key is visited as on the host.
  const Geometry g = plain_geometry(shape, false);
  cuda_detail::StreamScratch<T> delta(heads * shape.q_len, st);
  cuda_detail::launch_delta_from_probs<T>(delta.get(), dout, probs, v, g, st);
  // Overwrites: with q_len 0 (or kv_len 0) the empty sums leave zeros.
  cuda_detail::launch_backward<T>(dq, dk, dv, dout, probs, nullptr, delta.get(), q, k, v, g, false,
                                  st);
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void device_attention_forward<T>(T*, T*, const T*, const T*, const T*,                \
                                            const AttentionShape&, bool, void*);                 \
  template void device_attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, \
                                             const T*, const AttentionShape&, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
