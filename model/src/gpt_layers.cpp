// The GPT's linear layers and head permutes (the embedding and the output
// head are in gpt_ends.cpp).
#include "dtw/model/gpt_layers.h"

#include "buffers.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/matmul.h"
#include "dtw/kernels/permute.h"

namespace dtw::model {

using detail::matmul_flops;
using kernels::Trans;

template <TrainElement T>
void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t in,
                    std::int64_t out, LayerTimes* times, const kernels::Place& at) {
  {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(rows, out, in));
    // W is stored [out, in], so y = x Wᵀ multiplies by W transposed.
    kernels::matmul(at, Trans::kNo, Trans::kYes, rows, out, in, T(1), x, w, T(0), y);
  }
  if (b != nullptr) {
    ScopedLayerTimer timer(times, "bias");
    kernels::bias_add(at, y, b, rows, out);
  }
}

template <TrainElement T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t rows,
                     std::int64_t in, std::int64_t out, LayerTimes* times,
                     const kernels::Place& at) {
  // y = x Wᵀ + b  ⇒  dx = dy W  [rows,out]·[out,in],  dW += dyᵀ x  [out,rows]·[rows,in],
  // db += Σ_rows dy. beta = 1 in the dW product accumulates, as the conventions ask.
  if (dx != nullptr) {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(rows, in, out));
    kernels::matmul(at, Trans::kNo, Trans::kNo, rows, in, out, T(1), dy, w, T(0), dx);
  }
  {
    ScopedLayerTimer timer(times, "matmul", matmul_flops(out, in, rows));
    kernels::matmul(at, Trans::kYes, Trans::kNo, out, in, rows, T(1), dy, x, T(1), dw);
  }
  if (db != nullptr) {
    ScopedLayerTimer timer(times, "bias");
    kernels::bias_backward(at, db, dy, rows, out);
  }
}

// The permutes are kernels (dtw/kernels/permute.h): they only move
// head_dim-long runs between the [rows, width] and per-head layouts.
template <TrainElement T>
void split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t head_dim, const kernels::Place& at) {
  kernels::split_qkv(at, q, k, v, qkv, batch, seq, heads, head_dim);
}

template <TrainElement T>
void join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim, const kernels::Place& at) {
  kernels::join_qkv(at, qkv, q, k, v, batch, seq, heads, head_dim);
}

template <TrainElement T>
void merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim, const kernels::Place& at) {
  kernels::merge_heads(at, x, per_head, batch, seq, heads, head_dim);
}

template <TrainElement T>
void split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim, const kernels::Place& at) {
  kernels::split_heads(at, per_head, x, batch, seq, heads, head_dim);
}

BlockDims block_dims(const ModelConfig& config, std::int64_t batch, std::int64_t seq) {
  return {batch, seq, config.dim, config.heads, config.head_dim(), config.mlp_hidden};
}

std::int64_t head_scratch_size(std::int64_t rows, std::int64_t dim, std::int64_t vocab) {
  return rows * vocab + rows * dim;
}

#define DTW_INSTANTIATE(T)                                                                      \
  template void linear_forward<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t, \
                                  std::int64_t, LayerTimes*, const kernels::Place&);            \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t,      \
                                   std::int64_t, std::int64_t, LayerTimes*,                     \
                                   const kernels::Place&);                                      \
  template void split_qkv<T>(T*, T*, T*, const T*, std::int64_t, std::int64_t, std::int64_t,    \
                             std::int64_t, const kernels::Place&);                              \
  template void join_qkv<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t,       \
                            std::int64_t, std::int64_t, const kernels::Place&);                 \
  template void merge_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,          \
                               std::int64_t, const kernels::Place&);                            \
  template void split_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,          \
                               std::int64_t, const kernels::Place&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
