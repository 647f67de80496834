// The GPT's linear layers and head permutes (the embedding and the output
// head are in gpt_ends.cpp).
#include "dtw/model/gpt_layers.h"

#include <algorithm>
#include <vector>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/embedding.h"
#include "dtw/kernels/layernorm.h"
#include "dtw/kernels/matmul.h"

namespace dtw::model {

using detail::matmul_flops;
using detail::sized;
using kernels::Trans;

template <TrainElement T>
void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t in,
                    std::int64_t out, LayerTimes* times) {
  {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(rows, out, in));
    // W is stored [out, in], so y = x Wᵀ multiplies by W transposed.
    kernels::matmul(Trans::kNo, Trans::kYes, rows, out, in, T(1), x, w, T(0), y);
  }
  if (b != nullptr) {
    ScopedLayerTimer timer(times, "bias");
    kernels::bias_add(y, b, rows, out);
  }
}

template <TrainElement T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t rows,
                     std::int64_t in, std::int64_t out, LayerTimes* times) {
  // y = x Wᵀ + b  ⇒  dx = dy W  [rows,out]·[out,in],  dW += dyᵀ x  [out,rows]·[rows,in],
  // db += Σ_rows dy. beta = 1 in the dW product accumulates, as the conventions ask.
  if (dx != nullptr) {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(rows, in, out));
    kernels::matmul(Trans::kNo, Trans::kNo, rows, in, out, T(1), dy, w, T(0), dx);
  }
  {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(out, in, rows));
    kernels::matmul(Trans::kYes, Trans::kNo, out, in, rows, T(1), dy, x, T(1), dw);
  }
  if (db != nullptr) {
    ScopedLayerTimer timer(times, "bias");
    kernels::bias_backward(db, dy, rows, out);
  }
}

// The permutes move head_dim-long runs: row r = b·seq + t of the [rows, width]
// matrix holds, for each head h, the run at columns h·D … h·D + D − 1, which
// belongs at [b, h, t, :] of the per-head layout.
template <TrainElement T>
void split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t head_dim) {
  const std::int64_t width = heads * head_dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < seq; ++t) {
      const T* row = qkv + (b * seq + t) * 3 * width;
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t dst = ((b * heads + h) * seq + t) * head_dim;
        std::copy_n(row + h * head_dim, head_dim, q + dst);
        std::copy_n(row + width + h * head_dim, head_dim, k + dst);
        std::copy_n(row + 2 * width + h * head_dim, head_dim, v + dst);
      }
    }
  }
}

template <TrainElement T>
void join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim) {
  const std::int64_t width = heads * head_dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < seq; ++t) {
      T* row = qkv + (b * seq + t) * 3 * width;
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t src = ((b * heads + h) * seq + t) * head_dim;
        std::copy_n(q + src, head_dim, row + h * head_dim);
        std::copy_n(k + src, head_dim, row + width + h * head_dim);
        std::copy_n(v + src, head_dim, row + 2 * width + h * head_dim);
      }
    }
  }
}

template <TrainElement T>
void merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        std::copy_n(per_head + ((b * heads + h) * seq + t) * head_dim, head_dim,
                    x + ((b * seq + t) * heads + h) * head_dim);
}

template <TrainElement T>
void split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        std::copy_n(x + ((b * seq + t) * heads + h) * head_dim, head_dim,
                    per_head + ((b * heads + h) * seq + t) * head_dim);
}

BlockDims block_dims(const ModelConfig& config, std::int64_t batch, std::int64_t seq) {
  return {batch, seq, config.dim, config.heads, config.head_dim(), config.mlp_hidden};
}

std::int64_t head_scratch_size(std::int64_t rows, std::int64_t dim, std::int64_t vocab) {
  return rows * vocab + rows * dim;
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void linear_forward<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t,   \
                                  std::int64_t, LayerTimes*);                                     \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t,        \
                                   std::int64_t, std::int64_t, LayerTimes*);                      \
  template void split_qkv<T>(T*, T*, T*, const T*, std::int64_t, std::int64_t, std::int64_t,      \
                             std::int64_t);                                                       \
  template void join_qkv<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t,         \
                            std::int64_t, std::int64_t);                                          \
  template void merge_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,            \
                               std::int64_t);                                                     \
  template void split_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,            \
                               std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
