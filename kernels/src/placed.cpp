// The training kernels on a Place (dtw/kernels/place.h): the host kernel, or
// its CUDA twin (cuda_*.h) on the Place's device and stream. This file and
// placed_layers.cpp (the model's permutes and vocabulary-slice pieces) are
// the one place that decides; the model and the training layer pass their
// rank's Place and never branch on where their memory is.
//
// The device branch is compiled only where CUDA was found (`if constexpr` on
// DTW_HAVE_CUDA, and each device call in a generic lambda that only that
// branch instantiates), so a build without the toolkit links no CUDA symbol
// and answers a device Place with a clear error instead.
#include "dtw/kernels/activations.h"
#include "dtw/kernels/attention.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/cuda_activations.h"
#include "dtw/kernels/cuda_attention.h"
#include "dtw/kernels/cuda_cross_entropy.h"
#include "dtw/kernels/cuda_embedding.h"
#include "dtw/kernels/cuda_layernorm.h"
#include "dtw/kernels/cuda_matmul.h"
#include "dtw/kernels/cuda_optim.h"
#include "dtw/kernels/cuda_softmax.h"
#include "dtw/kernels/embedding.h"
#include "dtw/kernels/layernorm.h"
#include "dtw/kernels/matmul.h"
#include "dtw/kernels/optim.h"
#include "dtw/kernels/softmax.h"
#include "placed.h"

namespace dtw::kernels {

using detail::on_device;

// ---- activations.h ----
template <class T>
void bias_add(const Place& at, T* y, const T* bias, std::int64_t rows, std::int64_t cols) {
  if (at.is_host()) return bias_add(y, bias, rows, cols);
  on_device(at, "bias_add", [&](auto s) { device_bias_add(y, bias, rows, cols, s); });
}
template <class T>
void bias_backward(const Place& at, T* dbias, const T* dy, std::int64_t rows, std::int64_t cols) {
  if (at.is_host()) return bias_backward(dbias, dy, rows, cols);
  on_device(at, "bias_backward", [&](auto s) { device_bias_backward(dbias, dy, rows, cols, s); });
}
template <class T>
void gelu_forward(const Place& at, T* y, const T* x, std::int64_t n) {
  if (at.is_host()) return gelu_forward(y, x, n);
  on_device(at, "gelu_forward", [&](auto s) { device_gelu_forward(y, x, n, s); });
}
template <class T>
void gelu_backward(const Place& at, T* dx, const T* x, const T* dy, std::int64_t n) {
  if (at.is_host()) return gelu_backward(dx, x, dy, n);
  on_device(at, "gelu_backward", [&](auto s) { device_gelu_backward(dx, x, dy, n, s); });
}
template <class T>
void add_into(const Place& at, T* y, const T* x, std::int64_t n) {
  if (at.is_host()) return add_into(y, x, n);
  on_device(at, "add_into", [&](auto s) { device_add_into(y, x, n, s); });
}

// ---- attention.h ----
template <class T>
void attention_forward(const Place& at, T* out, T* probs, const T* q, const T* k, const T* v,
                       const AttentionShape& shape, bool causal) {
  if (at.is_host()) return attention_forward(out, probs, q, k, v, shape, causal);
  on_device(at, "attention_forward",
            [&](auto s) { device_attention_forward(out, probs, q, k, v, shape, causal, s); });
}
template <class T>
void attention_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* probs,
                        const T* q, const T* k, const T* v, const AttentionShape& shape) {
  if (at.is_host()) return attention_backward(dq, dk, dv, dout, probs, q, k, v, shape);
  on_device(at, "attention_backward", [&](auto s) {
    device_attention_backward(dq, dk, dv, dout, probs, q, k, v, shape, s);
  });
}
template <class T>
void attention_block_forward(const Place& at, T* out, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& shape, std::int64_t q_offset,
                             std::int64_t k_offset, bool causal) {
  if (at.is_host())
    return attention_block_forward(out, lse, q, k, v, shape, q_offset, k_offset, causal);
  on_device(at, "attention_block_forward", [&](auto s) {
    device_attention_block_forward(out, lse, q, k, v, shape, q_offset, k_offset, causal, s);
  });
}
template <class T>
void attention_merge(const Place& at, T* out, T* lse, const T* out_b, const T* lse_b,
                     std::int64_t rows, std::int64_t head_dim) {
  if (at.is_host()) return attention_merge(out, lse, out_b, lse_b, rows, head_dim);
  on_device(at, "attention_merge",
            [&](auto s) { device_attention_merge(out, lse, out_b, lse_b, rows, head_dim, s); });
}
template <class T>
void attention_block_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* out,
                              const T* lse, const T* q, const T* k, const T* v,
                              const AttentionShape& shape, std::int64_t q_offset,
                              std::int64_t k_offset, bool causal) {
  if (at.is_host())
    return attention_block_backward(dq, dk, dv, dout, out, lse, q, k, v, shape, q_offset,
                                    k_offset, causal);
  on_device(at, "attention_block_backward", [&](auto s) {
    device_attention_block_backward(dq, dk, dv, dout, out, lse, q, k, v, shape, q_offset,
                                    k_offset, causal, s);
  });
}
template <class T>
void attention_blockwise_forward(const Place& at, T* out, T* lse, const T* q, const T* k,
                                 const T* v, const AttentionShape& shape, std::int64_t block,
                                 bool causal) {
  if (at.is_host()) return attention_blockwise_forward(out, lse, q, k, v, shape, block, causal);
  on_device(at, "attention_blockwise_forward", [&](auto s) {
    device_attention_blockwise_forward(out, lse, q, k, v, shape, block, causal, s);
  });
}
template <class T>
void attention_blockwise_backward(const Place& at, T* dq, T* dk, T* dv, const T* dout, const T* out,
                                  const T* lse, const T* q, const T* k, const T* v,
                                  const AttentionShape& shape, std::int64_t block, bool causal) {
  if (at.is_host())
    return attention_blockwise_backward(dq, dk, dv, dout, out, lse, q, k, v, shape, block, causal);
  on_device(at, "attention_blockwise_backward", [&](auto s) {
    device_attention_blockwise_backward(dq, dk, dv, dout, out, lse, q, k, v, shape, block, causal,
                                        s);
  });
}

// ---- cross_entropy.h ----
template <class T>
T cross_entropy_forward(const Place& at, T* probs, T* losses, const T* logits,
                        const std::int32_t* targets, std::int64_t rows, std::int64_t vocab) {
  if (at.is_host()) return cross_entropy_forward(probs, losses, logits, targets, rows, vocab);
  T loss{};
  on_device(at, "cross_entropy_forward", [&](auto s) {
    loss = device_cross_entropy_forward(probs, losses, logits, targets, rows, vocab, s);
  });
  return loss;
}
template <class T>
void cross_entropy_backward(const Place& at, T* dlogits, const T* probs,
                            const std::int32_t* targets, std::int64_t rows, std::int64_t vocab,
                            T dloss) {
  if (at.is_host()) return cross_entropy_backward(dlogits, probs, targets, rows, vocab, dloss);
  on_device(at, "cross_entropy_backward", [&](auto s) {
    device_cross_entropy_backward(dlogits, probs, targets, rows, vocab, dloss, s);
  });
}

// ---- embedding.h ----
// The host kernels check every id; on a device the forward checks them with
// device_embedding_check_ids (one wait per call), so a bad id is the same clear
// error on both, and the backward trusts the forward's ids.
template <class T>
void embedding_forward(const Place& at, T* out, const std::int32_t* ids, const T* table,
                       std::int64_t n, std::int64_t dim, std::int64_t table_rows, bool accumulate) {
  if (at.is_host()) return embedding_forward(out, ids, table, n, dim, table_rows, accumulate);
  on_device(at, "embedding_forward", [&](auto s) {
    device_embedding_check_ids(ids, n, table_rows, "embedding_forward", s);
    device_embedding_forward(out, ids, table, n, dim, table_rows, accumulate, s);
  });
}
template <class T>
void embedding_backward(const Place& at, T* dtable, const std::int32_t* ids, const T* dout,
                        std::int64_t n, std::int64_t dim, std::int64_t table_rows) {
  if (at.is_host()) return embedding_backward(dtable, ids, dout, n, dim, table_rows);
  on_device(at, "embedding_backward", [&](auto s) {
    device_embedding_backward(dtable, ids, dout, n, dim, table_rows, s);
  });
}

// ---- layernorm.h ----
template <class T>
void layernorm_forward(const Place& at, T* y, T* mean, T* rstd, const T* x, const T* gamma,
                       const T* beta, std::int64_t rows, std::int64_t cols, T eps) {
  if (at.is_host()) return layernorm_forward(y, mean, rstd, x, gamma, beta, rows, cols, eps);
  on_device(at, "layernorm_forward", [&](auto s) {
    device_layernorm_forward(y, mean, rstd, x, gamma, beta, rows, cols, eps, s);
  });
}
template <class T>
void layernorm_backward(const Place& at, T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                        const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                        std::int64_t cols) {
  if (at.is_host())
    return layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols);
  on_device(at, "layernorm_backward", [&](auto s) {
    device_layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols, s);
  });
}

// ---- matmul.h ----
template <class T>
void matmul(const Place& at, Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n,
            std::int64_t k, T alpha, const T* a, const T* b, T beta, T* c) {
  if (at.is_host()) return matmul(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  on_device(at, "matmul", [&](auto s) {
    device_matmul(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, s);
  });
}

// ---- optim.h ----
template <class T>
void adamw_step(const Place& at, T* params, const T* grads, T* m, T* v, std::int64_t n,
                std::int64_t step, const AdamWConfig& config) {
  if (at.is_host()) return adamw_step(params, grads, m, v, n, step, config);
  on_device(at, "adamw_step",
            [&](auto s) { device_adamw_step(params, grads, m, v, n, step, config, s); });
}
template <class T>
void sgd_step(const Place& at, T* params, const T* grads, T* velocity, std::int64_t n,
              const SgdConfig& config) {
  if (at.is_host()) return sgd_step(params, grads, velocity, n, config);
  on_device(at, "sgd_step",
            [&](auto s) { device_sgd_step(params, grads, velocity, n, config, s); });
}
template <class T>
double sum_of_squares(const Place& at, const T* x, std::int64_t n) {
  if (at.is_host()) return sum_of_squares(x, n);
  double sum = 0;
  on_device(at, "sum_of_squares", [&](auto s) { sum = device_sum_of_squares(x, n, s); });
  return sum;
}
template <class T>
void scale(const Place& at, T* x, std::int64_t n, T factor) {
  if (at.is_host()) return scale(x, n, factor);
  on_device(at, "scale", [&](auto s) { device_scale(x, n, factor, s); });
}
template <class T>
double clip_grad_norm(const Place& at, T* grads, std::int64_t n, double max_norm) {
  if (at.is_host()) return clip_grad_norm(grads, n, max_norm);
  double norm = 0;
  on_device(at, "clip_grad_norm",
            [&](auto s) { norm = device_clip_grad_norm(grads, n, max_norm, s); });
  return norm;
}

// ---- softmax.h ----
template <class T>
void softmax_forward(const Place& at, T* y, const T* x, std::int64_t rows, std::int64_t cols) {
  if (at.is_host()) return softmax_forward(y, x, rows, cols);
  on_device(at, "softmax_forward", [&](auto s) { device_softmax_forward(y, x, rows, cols, s); });
}
template <class T>
void softmax_backward(const Place& at, T* dx, const T* y, const T* dy, std::int64_t rows,
                      std::int64_t cols) {
  if (at.is_host()) return softmax_backward(dx, y, dy, rows, cols);
  on_device(at, "softmax_backward",
            [&](auto s) { device_softmax_backward(dx, y, dy, rows, cols, s); });
}

#define DTW_PLACED(T)                                                                             \
  template void bias_add(const Place&, T*, const T*, std::int64_t, std::int64_t);                 \
  template void bias_backward(const Place&, T*, const T*, std::int64_t, std::int64_t);            \
  template void gelu_forward(const Place&, T*, const T*, std::int64_t);                           \
  template void gelu_backward(const Place&, T*, const T*, const T*, std::int64_t);                \
  template void add_into(const Place&, T*, const T*, std::int64_t);                               \
  template void attention_forward(const Place&, T*, T*, const T*, const T*, const T*,             \
                                  const AttentionShape&, bool);                                   \
  template void attention_backward(const Place&, T*, T*, T*, const T*, const T*, const T*,        \
                                   const T*, const T*, const AttentionShape&);                    \
  template void attention_block_forward(const Place&, T*, T*, const T*, const T*, const T*,       \
                                        const AttentionShape&, std::int64_t, std::int64_t, bool); \
  template void attention_merge(const Place&, T*, T*, const T*, const T*, std::int64_t,           \
                                std::int64_t);                                                    \
  template void attention_block_backward(const Place&, T*, T*, T*, const T*, const T*, const T*,  \
                                         const T*, const T*, const T*, const AttentionShape&,     \
                                         std::int64_t, std::int64_t, bool);                       \
  template void attention_blockwise_forward(const Place&, T*, T*, const T*, const T*, const T*,   \
                                            const AttentionShape&, std::int64_t, bool);           \
  template void attention_blockwise_backward(const Place&, T*, T*, T*, const T*, const T*,        \
                                             const T*, const T*, const T*, const T*,              \
                                             const AttentionShape&, std::int64_t, bool);          \
  template T cross_entropy_forward(const Place&, T*, T*, const T*, const std::int32_t*,           \
                                   std::int64_t, std::int64_t);                                   \
  template void cross_entropy_backward(const Place&, T*, const T*, const std::int32_t*,           \
                                       std::int64_t, std::int64_t, T);                            \
  template void embedding_forward(const Place&, T*, const std::int32_t*, const T*, std::int64_t,  \
                                  std::int64_t, std::int64_t, bool);                              \
  template void embedding_backward(const Place&, T*, const std::int32_t*, const T*, std::int64_t, \
                                   std::int64_t, std::int64_t);                                   \
  template void layernorm_forward(const Place&, T*, T*, T*, const T*, const T*, const T*,         \
                                  std::int64_t, std::int64_t, T);                                 \
  template void layernorm_backward(const Place&, T*, T*, T*, const T*, const T*, const T*,        \
                                   const T*, const T*, std::int64_t, std::int64_t);               \
  template void matmul(const Place&, Trans, Trans, std::int64_t, std::int64_t, std::int64_t, T,   \
                       const T*, const T*, T, T*);                                                \
  template void adamw_step(const Place&, T*, const T*, T*, T*, std::int64_t, std::int64_t,        \
                           const AdamWConfig&);                                                   \
  template void sgd_step(const Place&, T*, const T*, T*, std::int64_t, const SgdConfig&);         \
  template double sum_of_squares(const Place&, const T*, std::int64_t);                           \
  template void scale(const Place&, T*, std::int64_t, T);                                         \
  template double clip_grad_norm(const Place&, T*, std::int64_t, double);                         \
  template void softmax_forward(const Place&, T*, const T*, std::int64_t, std::int64_t);          \
  template void softmax_backward(const Place&, T*, const T*, const T*, std::int64_t, std::int64_t);

DTW_PLACED(float)
DTW_PLACED(double)
#undef DTW_PLACED

}  // namespace dtw::kernels
