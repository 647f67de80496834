// The GPT's two ends: the embedding (token and position lookups) and the
// output head (final norm, projection to the vocabulary, cross-entropy), for
// the whole model or a shard of it (a vocabulary slice, a token range).
#include <algorithm>
#include <vector>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/embedding.h"
#include "dtw/kernels/layernorm.h"
#include "dtw/kernels/permute.h"
#include "dtw/kernels/vocab_slice.h"
#include "dtw/model/gpt_layers.h"

namespace dtw::model {

using detail::sized;

namespace {

// Ids on a device are not read here (that would wait for the stream each
// pass): whoever copies them there checks them first, as Gpt::forward does.
void check_tokens(const char* who, const std::int32_t* tokens, const ModelConfig& config,
                  std::int64_t batch, std::int64_t seq, const kernels::Place& at) {
  DTW_CHECK_ARG(batch >= 0 && seq >= 0,
                who << ": batch " << batch << " and seq " << seq << " must not be negative");
  if (!at.is_host()) return;
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    DTW_CHECK_ARG(tokens[i] >= 0 && tokens[i] < config.vocab,
                  who << ": token id " << tokens[i] << " (sequence " << i / seq << ", position "
                      << i % seq << ") is outside [0, vocab " << config.vocab << ")");
  }
}

// The position of each local token: the runs' positions, or offset + t;
// checked on the host, then copied to where the lookups run.
kernels::Vector<std::int32_t> positions(const char* who, const ModelConfig& config,
                                        std::int64_t seq, std::int64_t offset,
                                        const TokenRuns* runs, const kernels::Place& place) {
  DTW_CHECK_ARG(runs == nullptr || runs->size() == seq,
                who << ": " << seq << " tokens per sequence but " << runs->size()
                    << " positions");
  std::vector<std::int32_t> p(static_cast<std::size_t>(seq));
  for (std::int64_t t = 0; t < seq; ++t) {
    const std::int64_t at = runs != nullptr ? runs->position(t) : offset + t;
    DTW_CHECK_ARG(at >= 0 && at < config.context,
                  who << ": position " << at << " of token " << t << " is outside the context "
                      << config.context << " of model " << config.name);
    p[t] = static_cast<std::int32_t>(at);
  }
  kernels::Vector<std::int32_t> placed(place);
  placed.assign(p.begin(), p.end());
  return placed;
}

template <class T>
Seams<T>& seams_of(const EndSeams<T>& at) {
  return at.seams != nullptr ? *at.seams : identity_seams<T>();
}

// The residual stream's rows at the ends: one per token unless the seams
// cut the sequence (EndSeams::stream_rows), then a whole number per
// sequence (batch 0: the head, which is not told the batch, checks only
// that they are no more than the tokens).
template <class T>
std::int64_t stream_rows_of(const EndSeams<T>& at, std::int64_t rows, std::int64_t batch) {
  if (at.stream_rows < 0) return rows;
  DTW_CHECK_ARG(at.stream_rows <= rows && (batch == 0 || at.stream_rows % batch == 0),
                "the residual stream's " << at.stream_rows << " rows are not a part of every one of "
                                         << batch << " sequences of " << rows << " tokens");
  return at.stream_rows;
}

// A vocabulary slice [v0, v1) of ids.
struct VocabSlice {
  std::int64_t v0, v1;
  bool whole;
};
// The head is told its slice only when it holds one (EndSeams' default is
// the whole vocabulary, which takes the fused kernel).
bool whole_vocab(IndexRange r) { return r.begin == 0 && r.end < 0; }
VocabSlice slice_of(IndexRange r, const ModelConfig& c) {
  const IndexRange v = r.resolved(c.vocab);
  return {v.begin, v.end, v.begin == 0 && v.end == c.vocab};
}

}  // namespace

template <TrainElement T>
void embed_forward(T* x, const std::int32_t* tokens, const T* wte, const T* wpe,
                   const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                   std::int64_t position_offset, LayerTimes* times, const EndSeams<T>& at) {
  check_tokens("embed_forward", tokens, config, batch, seq, at.place);
  const std::int64_t C = config.dim, N = batch * seq, n = stream_rows_of(at, N, batch);
  const std::int64_t s = n / std::max<std::int64_t>(batch, 1);  // the stream's tokens a sequence
  const kernels::Vector<std::int32_t> pos =
      positions("embed_forward", config, s, position_offset, at.positions, at.place);
  ScopedLayerTimer timer(times, "embedding");
  const VocabSlice vocab = slice_of(at.vocab, config);
  // When the seams cut the stream, the lookup covers every token and leave
  // keeps the stream's: look up into a buffer, not into x.
  kernels::Vector<T> looked;
  T* e = n == N ? x : sized(looked, N * C, at.place);
  // x = wte[token] + wpe[position]: a lookup, then a second lookup added on top.
  const kernels::Place& place = at.place;
  if (vocab.whole) {
    kernels::embedding_forward(place, e, tokens, wte, N, C, config.vocab);
  } else {
    // A vocabulary slice holds some tokens' rows; the others are another
    // slice's (zero rows here), and leave() sums the slices (Megatron's
    // VocabParallelEmbedding).
    kernels::vocab_embedding_forward(place, e, tokens, wte, N, C, vocab.v0, vocab.v1);
  }
  kernels::Vector<T> buffer(at.place);
  const std::span<const T> summed =
      seams_of(at).leave(Site::kEmbedding, -1, {e, static_cast<std::size_t>(N * C)}, buffer);
  DTW_CHECK_ARG(static_cast<std::int64_t>(summed.size()) == n * C,
                "Seams::leave(embedding) returned " << summed.size() << " values, not " << n * C
                    << (n == N ? "" : " (the stream's rows: the seams cut the sequence)"));
  kernels::copy_values(place, x, summed.data(), n * C);  // nothing when leave wrote in place
  for (std::int64_t b = 0; b < batch; ++b)
    kernels::embedding_forward(place, x + b * s * C, pos.data(), wpe, s, C, config.context, true);
}

template <TrainElement T>
void embed_backward(T* dwte, T* dwpe, const T* dx, const std::int32_t* tokens,
                    const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                    std::int64_t position_offset, LayerTimes* times, const EndSeams<T>& at) {
  check_tokens("embed_backward", tokens, config, batch, seq, at.place);
  const std::int64_t C = config.dim, N = batch * seq, n = stream_rows_of(at, N, batch);
  const std::int64_t s = n / std::max<std::int64_t>(batch, 1);
  const kernels::Vector<std::int32_t> pos =
      positions("embed_backward", config, s, position_offset, at.positions, at.place);
  ScopedLayerTimer timer(times, "embedding");
  const VocabSlice vocab = slice_of(at.vocab, config);
  // A lookup copies rows, so its gradient adds each row of dx back into the
  // table row it came from: dwte[token] += dx, dwpe[position] += dx.
  kernels::Vector<T> buffer(at.place);
  const std::span<const T> d_tok = seams_of(at).leave_backward(
      Site::kEmbedding, -1, {dx, static_cast<std::size_t>(n * C)}, buffer);
  DTW_CHECK_ARG(static_cast<std::int64_t>(d_tok.size()) == N * C,
                "Seams::leave_backward(embedding) returned " << d_tok.size() << " values, not "
                                                             << N * C << " (one row per token)");
  const kernels::Place& place = at.place;
  if (vocab.whole) {
    kernels::embedding_backward(place, dwte, tokens, d_tok.data(), N, C, config.vocab);
  } else {
    // Only the slice's rows: the other tokens' gradients are another slice's.
    kernels::vocab_embedding_backward(place, dwte, tokens, d_tok.data(), N, C, vocab.v0, vocab.v1);
  }
  for (std::int64_t b = 0; b < batch; ++b)
    kernels::embedding_backward(place, dwpe, pos.data(), dx + b * s * C, s, C, config.context);
}

namespace {

// Cross-entropy over a vocabulary slice without gathering the logits:
// loss = log Σ_all exp(l − m) + m − l_target with m the row maximum over all
// slices. Two reductions across the slices: the maxima (vocab_max), then the
// sums of exponentials and the target's logit together (vocab_sum).
template <class T>
T sliced_cross_entropy(const kernels::Place& at, T* probs, T* losses, const T* logits,
                       const std::int32_t* targets, std::int64_t rows, std::int64_t vocab_local,
                       const VocabSlice& vocab, Seams<T>& seams) {
  kernels::Vector<T> row_max(at), sums(at);
  row_max.resize(static_cast<std::size_t>(rows));
  sums.resize(static_cast<std::size_t>(2 * rows));
  kernels::vocab_row_max(at, row_max.data(), logits, rows, vocab_local);
  seams.vocab_max(row_max);
  // Σ exp(l − m) over the slice and the target's logit (0 unless this
  // slice holds it): vocab_sum adds both over the slices at once.
  kernels::vocab_exp_sums(at, sums.data(), logits, static_cast<const T*>(row_max.data()), targets,
                          rows, vocab_local, vocab.v0);
  seams.vocab_sum(sums);
  return kernels::vocab_cross_entropy(at, probs, losses, logits,
                                      static_cast<const T*>(row_max.data()),
                                      static_cast<const T*>(sums.data()), rows, vocab_local);
}

}  // namespace

template <TrainElement T>
T head_forward(HeadCache<T>& cache, const T* x, const std::int32_t* targets,
               const HeadWeights<const T>& w, std::int64_t rows, std::int64_t dim,
               std::int64_t vocab, LayerTimes* times, const EndSeams<T>& at) {
  Seams<T>& seams = seams_of(at);
  const std::int64_t n = stream_rows_of(at, rows, 0);  // x's rows
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_forward(at.place, sized(cache.ln, n * dim, at.place),
                               sized(cache.mean, n, at.place), sized(cache.rstd, n, at.place), x,
                               w.lnf_gamma, w.lnf_beta, n, dim);
  }
  cache.in.set_place(at.place);  // the seams resize it: it must be where they write
  const std::span<const T> in = seams.enter(Site::kHead, -1, cache.ln, cache.in);
  const bool new_buffer = !cache.in.empty() && in.data() == cache.in.data();
  DTW_CHECK_ARG(static_cast<std::int64_t>(in.size()) == rows * dim &&
                    new_buffer == at.head_input.new_buffer,
                "Seams::enter(head) returned " << in.size() << " values"
                    << (new_buffer ? " in its buffer" : "") << "; the head needs its " << rows
                    << " rows of " << dim << " (one per target)"
                    << (at.head_input.new_buffer ? " in its buffer, as sublayer_input declares"
                                                 : ""));
  if (!new_buffer) cache.in.clear();
  linear_forward(sized(cache.logits, rows * vocab, at.place), in.data(), w.weight,
                 static_cast<const T*>(nullptr), rows, dim, vocab, times, at.place);
  // The backward enters again (Megatron-SP): the gathered input goes now.
  if (at.head_input.enter_again) kernels::Vector<T>(at.place).swap(cache.in);
  if (targets == nullptr) {
    cache.probs.clear();
    return T(0);
  }
  ScopedLayerTimer timer(times, "loss");
  if (whole_vocab(at.vocab)) {
    return kernels::cross_entropy_forward(
        at.place, sized(cache.probs, rows * vocab, at.place), sized(cache.losses, rows, at.place),
        static_cast<const T*>(cache.logits.data()), targets, rows, vocab);
  }
  const VocabSlice slice{at.vocab.begin, at.vocab.end, false};
  DTW_CHECK_ARG(slice.v1 - slice.v0 == vocab,
                "head_forward: the vocabulary slice [" << slice.v0 << ", " << slice.v1
                                                       << ") does not have " << vocab << " rows");
  return sliced_cross_entropy(at.place, sized(cache.probs, rows * vocab, at.place),
                              sized(cache.losses, rows, at.place), cache.logits.data(), targets,
                              rows, vocab, slice, seams);
}

template <TrainElement T>
void head_backward(T* dx, const HeadWeights<T>& grads, const T* x, const std::int32_t* targets,
                   const HeadCache<T>& cache, const HeadWeights<const T>& w, std::int64_t rows,
                   std::int64_t dim, std::int64_t vocab, T dloss, T* scratch, LayerTimes* times,
                   const EndSeams<T>& at) {
  DTW_CHECK_ARG(targets != nullptr && cache.probs.size() == static_cast<std::size_t>(rows * vocab),
                "head_backward: the forward pass ran without targets (or on other sizes: "
                    << rows << " rows, vocab " << vocab << ")");
  T* dlogits = scratch;
  T* dln = scratch + rows * vocab;
  {
    // loss = logsumexp(logits) − logits[target]  ⇒  dlogits = dloss·(probs − onehot).
    ScopedLayerTimer timer(times, "loss");
    if (whole_vocab(at.vocab)) {
      kernels::cross_entropy_backward(at.place, dlogits, cache.probs.data(), targets, rows, vocab,
                                      dloss);
    } else {
      // The probabilities are already normalised over every slice; the
      // one-hot lands only on the slice holding the target.
      kernels::vocab_cross_entropy_backward(at.place, dlogits, cache.probs.data(), targets, rows,
                                            vocab, at.vocab.begin, dloss);
    }
  }
  // logits = in Wᵀ: a linear layer without bias (tied: W is wte, whose
  // gradient also receives the embedding's contribution).
  const std::int64_t n = stream_rows_of(at, rows, 0);  // x's rows
  const T* in = cache.in.empty() ? cache.ln.data() : cache.in.data();
  kernels::Vector<T> again(at.place);
  if (at.head_input.enter_again) {
    const std::span<const T> x_again = seams_of(at).enter(Site::kHead, -1, cache.ln, again);
    DTW_CHECK_ARG(static_cast<std::int64_t>(x_again.size()) == rows * dim,
                  "Seams::enter(head) entered again in the backward returned "
                      << x_again.size() << " values; the head needs " << rows * dim);
    in = x_again.data();
  }
  linear_backward(dln, grads.weight, static_cast<T*>(nullptr), dlogits, in, w.weight, rows, dim,
                  vocab, times, at.place);
  kernels::Vector<T> buffer(at.place);
  const std::span<const T> d_norm = seams_of(at).enter_backward(
      Site::kHead, -1, {dln, static_cast<std::size_t>(rows * dim)}, buffer);
  DTW_CHECK_ARG(static_cast<std::int64_t>(d_norm.size()) == n * dim,
                "Seams::enter_backward(head) returned " << d_norm.size() << " values; the final "
                                                        << "norm's output holds " << n * dim);
  ScopedLayerTimer timer(times, "layernorm");
  kernels::layernorm_backward(at.place, dx, grads.lnf_gamma, grads.lnf_beta, d_norm.data(), x,
                              cache.mean.data(), cache.rstd.data(), w.lnf_gamma, n, dim);
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void embed_forward<T>(T*, const std::int32_t*, const T*, const T*, const ModelConfig&, \
                                 std::int64_t, std::int64_t, std::int64_t, LayerTimes*,           \
                                 const EndSeams<T>&);                                             \
  template void embed_backward<T>(T*, T*, const T*, const std::int32_t*, const ModelConfig&,      \
                                  std::int64_t, std::int64_t, std::int64_t, LayerTimes*,          \
                                  const EndSeams<T>&);                                            \
  template T head_forward<T>(HeadCache<T>&, const T*, const std::int32_t*,                        \
                             const HeadWeights<const T>&, std::int64_t, std::int64_t,             \
                             std::int64_t, LayerTimes*, const EndSeams<T>&);                      \
  template void head_backward<T>(T*, const HeadWeights<T>&, const T*, const std::int32_t*,        \
                                 const HeadCache<T>&, const HeadWeights<const T>&, std::int64_t,  \
                                 std::int64_t, std::int64_t, T, T*, LayerTimes*,                  \
                                 const EndSeams<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
