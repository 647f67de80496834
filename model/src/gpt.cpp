// The whole GPT: the layers of gpt_layers.h chained over the residual stream.
#include "dtw/model/gpt.h"

#include <algorithm>

#include "buffers.h"
#include "dtw/errors.h"

namespace dtw::model {

using detail::sized;

template <class T>
Gpt<T>::Gpt(const ModelConfig& config) : config_(config) {
  DTW_CHECK_ARG(config.kind == ModelKind::kGpt,
                "Gpt: model " << config.name << " is a " << name_of(config.kind) << ", not a gpt");
  layout_ = param_layout(config_);  // validates
}

template <class T>
T Gpt<T>::forward(const T* params, const std::int32_t* tokens, const std::int32_t* targets,
                  std::int64_t batch, std::int64_t seq_len) {
  const ModelConfig& c = config_;
  DTW_CHECK_ARG(batch >= 1, "Gpt::forward: batch " << batch << " must be at least 1");
  DTW_CHECK_ARG(seq_len >= 1 && seq_len <= c.context, "Gpt::forward: seq_len "
                                                          << seq_len << " is outside [1, context "
                                                          << c.context << "] of model " << c.name);
  has_forward_ = false;  // until this forward completes
  const std::int64_t N = batch * seq_len, C = c.dim, L = c.layers;
  GptActivations<T>& a = acts_;
  a.batch = batch;
  a.seq = seq_len;
  a.tokens.assign(tokens, tokens + N);
  if (targets != nullptr) {
    for (std::int64_t i = 0; i < N; ++i) {
      DTW_CHECK_ARG(targets[i] >= 0 && targets[i] < c.vocab,
                    "Gpt::forward: target id " << targets[i] << " (sequence " << i / seq_len
                                               << ", position " << i % seq_len
                                               << ") is outside [0, vocab " << c.vocab << ")");
    }
    a.targets.assign(targets, targets + N);
  } else {
    a.targets.clear();
  }
  a.x.resize(static_cast<std::size_t>(L + 1));
  a.blocks.resize(static_cast<std::size_t>(L));

  // Token and position embeddings start the residual stream ...
  embed_forward(sized(a.x[0], N * C), tokens, params + layout_.find("wte").offset,
                params + layout_.find("wpe").offset, c, batch, seq_len, 0, times_);
  // ... every block reads it and writes the next version of it ...
  const BlockDims d = block_dims(c, batch, seq_len);
  for (int l = 0; l < static_cast<int>(L); ++l) {
    block_forward(sized(a.x[l + 1], N * C), a.blocks[l], a.x[l].data(),
                  block_weights(layout_, l, params), d, times_);
  }
  // ... and the head turns the last version into next-token probabilities.
  const T loss = head_forward(a.head, a.x[L].data(), targets,
                              head_weights(layout_, c.tied_head, params), N, C, c.vocab, times_);
  has_forward_ = true;
  return loss;
}

template <class T>
void Gpt<T>::backward(const T* params, T* grads, T loss_scale) {
  DTW_CHECK_ARG(has_forward_, "Gpt::backward: no completed forward pass to differentiate");
  DTW_CHECK_ARG(!acts_.targets.empty(),
                "Gpt::backward: the forward pass ran without targets (inference)");
  const ModelConfig& c = config_;
  const GptActivations<T>& a = acts_;
  const std::int64_t N = a.batch * a.seq, C = c.dim, L = c.layers;
  const BlockDims d = block_dims(c, a.batch, a.seq);
  T* scratch = sized(scratch_, std::max(head_scratch_size(N, C, c.vocab), block_scratch_size(d)));
  T* dx = sized(dx_, N * C);

  // The loss is the mean over N tokens, so each token's loss enters with
  // weight loss_scale/N.
  const T dloss = loss_scale / static_cast<T>(N);
  head_backward(dx, head_weights(layout_, c.tied_head, grads), a.x[L].data(), a.targets.data(),
                a.head, head_weights(layout_, c.tied_head, params), N, C, c.vocab, dloss, scratch,
                times_);
  // Backward through the blocks in reverse; dx holds d loss / d x[l] as l
  // falls (block_backward may overwrite its input gradient in place).
  for (int l = static_cast<int>(L) - 1; l >= 0; --l) {
    block_backward(dx, block_weights(layout_, l, grads), static_cast<const T*>(dx), a.x[l].data(),
                   a.blocks[l], block_weights(layout_, l, params), d, scratch, times_);
  }
  // With a tied head, dwte has already received the head's share; the
  // embedding adds its own (the conventions make both accumulate).
  embed_backward(grads + layout_.find("wte").offset, grads + layout_.find("wpe").offset,
                 static_cast<const T*>(dx), a.tokens.data(), c, a.batch, a.seq, 0, times_);
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace dtw::model
