// The GPT's outer layers: linear layers, the head permutes, the embedding and
// the output head (final norm, projection to the vocabulary, cross-entropy).
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

namespace {

void check_tokens(const char* who, const std::int32_t* tokens, const ModelConfig& config,
                  std::int64_t batch, std::int64_t seq, std::int64_t position_offset) {
  DTW_CHECK_ARG(batch >= 0 && seq >= 0,
                who << ": batch " << batch << " and seq " << seq << " must not be negative");
  DTW_CHECK_ARG(position_offset >= 0 && position_offset + seq <= config.context,
                who << ": positions [" << position_offset << ", " << position_offset + seq
                    << ") exceed the context " << config.context << " of model " << config.name);
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    DTW_CHECK_ARG(tokens[i] >= 0 && tokens[i] < config.vocab,
                  who << ": token id " << tokens[i] << " (sequence " << i / seq << ", position "
                      << i % seq << ") is outside [0, vocab " << config.vocab << ")");
  }
}

std::vector<std::int32_t> positions(std::int64_t seq, std::int64_t offset) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(seq));
  for (std::int64_t t = 0; t < seq; ++t) p[t] = static_cast<std::int32_t>(offset + t);
  return p;
}

}  // namespace

template <TrainElement T>
void embed_forward(T* x, const std::int32_t* tokens, const T* wte, const T* wpe,
                   const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                   std::int64_t position_offset, LayerTimes* times) {
  check_tokens("embed_forward", tokens, config, batch, seq, position_offset);
  ScopedLayerTimer timer(times, "embedding");
  const std::int64_t C = config.dim;
  // x = wte[token] + wpe[position]: a lookup, then a second lookup added on top.
  kernels::embedding_forward(x, tokens, wte, batch * seq, C, config.vocab);
  const std::vector<std::int32_t> pos = positions(seq, position_offset);
  for (std::int64_t b = 0; b < batch; ++b)
    kernels::embedding_forward(x + b * seq * C, pos.data(), wpe, seq, C, config.context, true);
}

template <TrainElement T>
void embed_backward(T* dwte, T* dwpe, const T* dx, const std::int32_t* tokens,
                    const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                    std::int64_t position_offset, LayerTimes* times) {
  check_tokens("embed_backward", tokens, config, batch, seq, position_offset);
  ScopedLayerTimer timer(times, "embedding");
  const std::int64_t C = config.dim;
  // A lookup copies rows, so its gradient adds each row of dx back into the
  // table row it came from: dwte[token] += dx, dwpe[position] += dx.
  kernels::embedding_backward(dwte, tokens, dx, batch * seq, C, config.vocab);
  const std::vector<std::int32_t> pos = positions(seq, position_offset);
  for (std::int64_t b = 0; b < batch; ++b)
    kernels::embedding_backward(dwpe, pos.data(), dx + b * seq * C, seq, C, config.context);
}

template <TrainElement T>
T head_forward(HeadCache<T>& cache, const T* x, const std::int32_t* targets,
               const HeadWeights<const T>& w, std::int64_t rows, std::int64_t dim,
               std::int64_t vocab, LayerTimes* times) {
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_forward(sized(cache.ln, rows * dim), sized(cache.mean, rows),
                               sized(cache.rstd, rows), x, w.lnf_gamma, w.lnf_beta, rows, dim);
  }
  linear_forward(sized(cache.logits, rows * vocab), cache.ln.data(), w.weight,
                 static_cast<const T*>(nullptr), rows, dim, vocab, times);
  if (targets == nullptr) {
    cache.probs.clear();
    return T(0);
  }
  ScopedLayerTimer timer(times, "loss");
  return kernels::cross_entropy_forward(sized(cache.probs, rows * vocab), sized(cache.losses, rows),
                                        cache.logits.data(), targets, rows, vocab);
}

template <TrainElement T>
void head_backward(T* dx, const HeadWeights<T>& grads, const T* x, const std::int32_t* targets,
                   const HeadCache<T>& cache, const HeadWeights<const T>& w, std::int64_t rows,
                   std::int64_t dim, std::int64_t vocab, T dloss, T* scratch, LayerTimes* times) {
  DTW_CHECK_ARG(targets != nullptr && cache.probs.size() == static_cast<std::size_t>(rows * vocab),
                "head_backward: the forward pass ran without targets (or on other sizes: "
                    << rows << " rows, vocab " << vocab << ")");
  T* dlogits = scratch;
  T* dln = scratch + rows * vocab;
  {
    // loss = logsumexp(logits) − logits[target]  ⇒  dlogits = dloss·(probs − onehot).
    ScopedLayerTimer timer(times, "loss");
    kernels::cross_entropy_backward(dlogits, cache.probs.data(), targets, rows, vocab, dloss);
  }
  // logits = ln Wᵀ: a linear layer without bias (tied: W is wte, whose
  // gradient also receives the embedding's contribution).
  linear_backward(dln, grads.weight, static_cast<T*>(nullptr), dlogits, cache.ln.data(), w.weight,
                  rows, dim, vocab, times);
  ScopedLayerTimer timer(times, "layernorm");
  kernels::layernorm_backward(dx, grads.lnf_gamma, grads.lnf_beta, dln, x, cache.mean.data(),
                              cache.rstd.data(), w.lnf_gamma, rows, dim);
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
                               std::int64_t);                                                     \
  template void embed_forward<T>(T*, const std::int32_t*, const T*, const T*, const ModelConfig&, \
                                 std::int64_t, std::int64_t, std::int64_t, LayerTimes*);          \
  template void embed_backward<T>(T*, T*, const T*, const std::int32_t*, const ModelConfig&,      \
                                  std::int64_t, std::int64_t, std::int64_t, LayerTimes*);         \
  template T head_forward<T>(HeadCache<T>&, const T*, const std::int32_t*,                        \
                             const HeadWeights<const T>&, std::int64_t, std::int64_t,             \
                             std::int64_t, LayerTimes*);                                          \
  template void head_backward<T>(T*, const HeadWeights<T>&, const T*, const std::int32_t*,        \
                                 const HeadCache<T>&, const HeadWeights<const T>&, std::int64_t,  \
                                 std::int64_t, std::int64_t, T, T*, LayerTimes*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
