// The whole GPT: the layers of gpt_layers.h chained over the residual stream,
// one unit at a time (units.h), so a pipeline stage or a ZeRO-3 rank runs the
// same code as the whole model.
#include "dtw/model/gpt.h"

#include <algorithm>
#include <string>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/permute.h"

namespace dtw::model {

using detail::sized;

namespace {

// The tensors of block `layer` when the block's unit starts at `unit` (element
// unit_begin of the flat buffer), as block_weights does for a whole buffer.
template <class P>
BlockWeights<P> unit_block_weights(const ParamLayout& layout, int layer, P* unit,
                                   std::int64_t unit_begin) {
  const std::string h = "h." + std::to_string(layer) + ".";
  auto at = [&](const char* name) { return unit + (layout.find(h + name).offset - unit_begin); };
  BlockWeights<P> w;
  w.ln1_gamma = at("ln1.gamma");
  w.ln1_beta = at("ln1.beta");
  w.attn = {at("attn.qkv.weight"), at("attn.qkv.bias"), at("attn.proj.weight"),
            at("attn.proj.bias")};
  w.ln2_gamma = at("ln2.gamma");
  w.ln2_beta = at("ln2.beta");
  w.mlp = {at("mlp.fc.weight"), at("mlp.fc.bias"), at("mlp.proj.weight"), at("mlp.proj.bias")};
  return w;
}

// The head's tensors: the final norm from the head unit, the projection from
// the head unit or, tied, wte from the embedding unit (which starts at 0).
template <class P>
HeadWeights<P> unit_head_weights(const ParamLayout& layout, bool tied, P* head, const Unit& unit,
                                 P* embed) {
  auto at = [&](const char* name) { return head + (layout.find(name).offset - unit.begin); };
  return {at("lnf.gamma"), at("lnf.beta"),
          tied ? embed + layout.find("wte").offset : at("head.weight")};
}

// Blocks [first, end) of a unit range: unit u > 0 is block u − 1.
std::pair<int, int> blocks_of(UnitRange r, int layers) {
  return {std::max(r.begin - 1, 0), std::min(r.end - 1, layers)};
}

}  // namespace

namespace {

// What a shard's blocks compute: its heads and hidden units.
BlockDims shard_dims(const ModelConfig& c, const ModelShard& s, std::int64_t batch,
                     std::int64_t seq) {
  BlockDims d = block_dims(c, batch, seq);
  const IndexRange h = s.heads.resolved(c.heads), f = s.hidden.resolved(c.mlp_hidden);
  d.heads = h.end - h.begin;
  d.mlp_hidden = f.end - f.begin;
  return d;
}

// The embedding's and head's view of the shard: its vocabulary rows (left
// at the default when whole, so the head takes the fused kernel) and the
// positions of its tokens.
template <class T>
EndSeams<T> end_seams(const ModelConfig& c, const ModelShard& s, Seams<T>* seams,
                      const TokenRuns* positions, std::int64_t batch, std::int64_t stream,
                      const kernels::Place& place) {
  EndSeams<T> at{seams, {}, positions};
  at.place = place;
  const IndexRange v = s.vocab.resolved(c.vocab);
  if (v.begin != 0 || v.end != c.vocab) at.vocab = v;
  if (s.cut_by_seams) at.stream_rows = batch * stream;
  at.head_input = (seams != nullptr ? *seams : identity_seams<T>()).sublayer_input(Site::kHead, stream);
  return at;
}

// Tokens of each sequence the residual stream holds when the forward is
// given seq_len of each: all of them, or the shard's part when the seams
// cut the sequence (ModelShard::cut_by_seams).
std::int64_t stream_len(const ModelShard& s, std::int64_t seq_len, const char* who) {
  if (!s.cut_by_seams) return seq_len;
  DTW_CHECK_ARG(seq_len % s.sequence_shards == 0,
                who << ": a sequence of " << seq_len << " tokens does not split into the shard's "
                    << s.sequence_shards << " sequence shards (the seams cut it)");
  return seq_len / s.sequence_shards;
}

std::int64_t vocab_rows(const ModelConfig& c, const ModelShard& s) {
  const IndexRange v = s.vocab.resolved(c.vocab);
  return v.end - v.begin;
}

}  // namespace

template <TrainElement T>
Gpt<T>::Gpt(const ModelConfig& config, const ModelShard& shard) : config_(config), shard_(shard) {
  DTW_CHECK_ARG(config.kind == ModelKind::kGpt,
                "Gpt: model " << config.name << " is a " << name_of(config.kind) << ", not a gpt");
  layout_ = param_layout(config_, shard_);  // validates both
  units_ = model_units(config_, layout_);
}

template <TrainElement T>
T Gpt<T>::forward(const T* params, const std::int32_t* tokens, const std::int32_t* targets,
                  std::int64_t batch, std::int64_t seq_len) {
  FlatAccess<T> access(units_, params, nullptr);
  return forward(access, {0, static_cast<int>(units_.size())}, tokens, nullptr, targets, batch,
                 seq_len);
}

template <TrainElement T>
T Gpt<T>::forward(UnitAccess<T>& access, UnitRange range, const std::int32_t* tokens,
                  const T* x_in, const std::int32_t* targets, std::int64_t batch,
                  std::int64_t seq_len) {
  const ModelConfig& c = config_;
  const int U = static_cast<int>(units_.size());
  DTW_CHECK_ARG(0 <= range.begin && range.begin < range.end && range.end <= U,
                "Gpt::forward: unit range [" << range.begin << ", " << range.end
                                             << ") is empty or outside [0, " << U << ")");
  DTW_CHECK_ARG(batch >= 1, "Gpt::forward: batch " << batch << " must be at least 1");
  const std::int64_t stream = stream_len(shard_, seq_len, "Gpt::forward");
  const std::int64_t whole_len = stream * shard_.sequence_shards;
  DTW_CHECK_ARG(seq_len >= 1 && whole_len <= c.context,
                "Gpt::forward: seq_len " << seq_len << " (" << shard_.sequence_shards
                                         << " sequence shards: " << whole_len
                                         << " tokens a sequence) is outside [1, context "
                                         << c.context << "] of model " << c.name);
  const bool first = range.begin == 0, last = range.end == U;
  DTW_CHECK_ARG(first ? tokens != nullptr : x_in != nullptr,
                "Gpt::forward: units [" << range.begin << ", " << range.end << ") need "
                                        << (first ? "tokens" : "an input activation x_in"));
  has_forward_ = false;  // until this forward completes
  // N tokens, n rows of the residual stream (fewer when the seams cut it).
  const std::int64_t N = batch * seq_len, n = batch * stream, C = c.dim, L = c.layers,
                     V = vocab_rows(c, shard_);
  positions_ = shard_.positions(whole_len);
  Seams<T>* seams = seams_ != nullptr ? seams_ : &own_seams_;
  const EndSeams<T> ends = end_seams(c, shard_, seams, &positions_, batch, stream, place_);
  const auto [b0, b1] = blocks_of(range, static_cast<int>(L));
  GptActivations<T>& a = acts_;
  a.batch = batch;
  a.seq = seq_len;
  a.stream = stream;
  a.range = range;
  // The ids are read here, on the host, before they go where the lookups
  // run (the layers do not read ids on a device).
  auto check_ids = [&](const char* what, const std::int32_t* ids) {
    for (std::int64_t i = 0; i < N; ++i) {
      DTW_CHECK_ARG(ids[i] >= 0 && ids[i] < c.vocab,
                    "Gpt::forward: " << what << " id " << ids[i] << " (sequence " << i / seq_len
                                     << ", position " << i % seq_len << ") is outside [0, vocab "
                                     << c.vocab << ")");
    }
  };
  a.tokens.set_place(place_);
  a.targets.set_place(place_);
  a.tokens.clear();
  a.targets.clear();
  if (first) {
    check_ids("token", tokens);
    a.tokens.assign(tokens, tokens + N);
  }
  if (last && targets != nullptr) {
    check_ids("target", targets);
    a.targets.assign(targets, targets + N);
  }
  // Keep only what this range's backward reads: x[b0 .. b1] and blocks [b0, b1).
  a.x.resize(static_cast<std::size_t>(L + 1));
  a.blocks.resize(static_cast<std::size_t>(L));
  for (int i = 0; i <= L; ++i)
    if (i < b0 || i > b1) a.x[i].clear();
  for (int i = 0; i < L; ++i)
    if (i < b0 || i >= b1) a.blocks[i] = BlockCache<T>();
  if (!last) a.head = HeadCache<T>();

  if (first) {
    // Token and position embeddings start the residual stream ...
    const T* e = access.params(0);
    embed_forward(sized(a.x[0], n * C, place_), a.tokens.data(), e + layout_.find("wte").offset,
                  e + layout_.find("wpe").offset, c, batch, seq_len, 0, times_, ends);
    access.release_params(0);
  } else {
    kernels::copy_values(place_, sized(a.x[b0], n * C, place_), x_in, n * C);
  }
  // ... every block reads it and writes the next version of it ...
  const BlockDims d = shard_dims(c, shard_, batch, stream);
  for (int l = b0; l < b1; ++l) {
    const int u = l + 1;
    const T* p = access.params(u);
    block_forward(sized(a.x[l + 1], n * C, place_), a.blocks[l], a.x[l].data(),
                  unit_block_weights(layout_, l, p, units_[u].begin), d, times_,
                  BlockSeams<T>{seams, l, &positions_, place_});
    access.release_params(u);
  }
  // ... and the head turns the last version into next-token probabilities.
  T loss = 0;
  if (last) {
    const T* embed = head_is_tied(c) ? access.params(0) : nullptr;
    const T* h = access.params(U - 1);
    loss = head_forward(a.head, a.x[L].data(), targets != nullptr ? a.targets.data() : nullptr,
                        unit_head_weights(layout_, head_is_tied(c), h, units_[U - 1], embed), N, C,
                        V, times_, ends);
    access.release_params(U - 1);
    if (head_is_tied(c)) access.release_params(0);
  }
  has_forward_ = true;
  return loss;
}

template <TrainElement T>
void Gpt<T>::backward(const T* params, T* grads, T loss_scale) {
  backward(params, grads, loss_scale, GradReady());
}

template <TrainElement T>
void Gpt<T>::backward(const T* params, T* grads, T loss_scale, const GradReady& on_grad_ready) {
  FlatAccess<T> access(units_, params, grads);
  backward(access, nullptr, loss_scale, on_grad_ready);
}

template <TrainElement T>
void Gpt<T>::backward(UnitAccess<T>& access, const T* dx_out, T loss_scale,
                      const GradReady& on_grad_ready) {
  DTW_CHECK_ARG(has_forward_, "Gpt::backward: no completed forward pass to differentiate");
  const ModelConfig& c = config_;
  const GptActivations<T>& a = acts_;
  const int U = static_cast<int>(units_.size());
  const bool first = a.range.begin == 0, last = a.range.end == U;
  DTW_CHECK_ARG(!last || !a.targets.empty(),
                "Gpt::backward: the forward pass ran without targets (inference)");
  DTW_CHECK_ARG(last || dx_out != nullptr,
                "Gpt::backward: units [" << a.range.begin << ", " << a.range.end
                                         << ") end before the head: pass dx_out");
  auto ready = [&](std::int64_t begin, std::int64_t end) {
    if (on_grad_ready) on_grad_ready(begin, end);
  };
  const std::int64_t N = a.batch * a.seq, n = a.batch * a.stream, C = c.dim, L = c.layers,
                     V = vocab_rows(c, shard_);
  const auto [b0, b1] = blocks_of(a.range, static_cast<int>(L));
  const BlockDims d = shard_dims(c, shard_, a.batch, a.stream);
  Seams<T>* seams = seams_ != nullptr ? seams_ : &own_seams_;
  const EndSeams<T> ends = end_seams(c, shard_, seams, &positions_, a.batch, a.stream, place_);
  T* scratch = sized(
      scratch_,
      std::max(last ? head_scratch_size(N, C, V) : 0, b1 > b0 ? block_scratch_size(d) : 0), place_);
  T* dx = sized(dx_, n * C, place_);
  const ParamView& wte = layout_.find("wte");

  if (last) {
    // The loss is the mean over N tokens, so each token's loss enters with
    // weight loss_scale/N.
    const T dloss = loss_scale / static_cast<T>(N);
    const Unit& head = units_[U - 1];
    const T* embed = head_is_tied(c) ? access.params(0) : nullptr;
    const T* h = access.params(U - 1);
    T* gembed = head_is_tied(c) ? access.grads(0) : nullptr;
    head_backward(dx, unit_head_weights(layout_, head_is_tied(c), access.grads(U - 1), head, gembed),
                  a.x[L].data(), a.targets.data(), a.head,
                  unit_head_weights(layout_, head_is_tied(c), h, head, embed), N, C, V, dloss,
                  scratch, times_, ends);
    access.release_params(U - 1);
    if (head_is_tied(c)) access.release_params(0);
    ready(head.begin, head.end);
  } else if (dx_out != nullptr) {  // checked above; the test tells the compiler too
    kernels::copy_values(place_, dx, dx_out, n * C);
  }
  // Backward through the blocks in reverse; dx holds d loss / d x[l] as l
  // falls (block_backward may overwrite its input gradient in place).
  // A block reports each of its tensors as the block's backward finishes it
  // (PyTorch's per-parameter hooks), so DDP's buckets need not wait for a
  // whole block.
  for (int l = b1 - 1; l >= b0; --l) {
    const int u = l + 1;
    const T* p = access.params(u);
    T* g = access.grads(u);
    const GradFinal<T> done = [&](const T* grad, std::int64_t count) {
      const std::int64_t begin = units_[u].begin + (grad - g);
      ready(begin, begin + count);
    };
    block_backward(dx, unit_block_weights(layout_, l, g, units_[u].begin),
                   static_cast<const T*>(dx), a.x[l].data(), a.blocks[l],
                   unit_block_weights(layout_, l, p, units_[u].begin), d, scratch, times_, done,
                   BlockSeams<T>{seams, l, &positions_, place_});
    access.release_params(u);
  }
  if (first) {
    // With a tied head, dwte has already received the head's share; the
    // embedding adds its own (the conventions make both accumulate), so the
    // embedding's gradient is the last one final.
    T* g = access.grads(0);
    embed_backward(g + wte.offset, g + layout_.find("wpe").offset, static_cast<const T*>(dx),
                   a.tokens.data(), c, a.batch, a.seq, 0, times_, ends);
    ready(units_[0].begin, units_[0].end);
  } else if (last && head_is_tied(c)) {
    // This stage holds the tied head but not the embedding: its share of
    // dwte is complete here.
    ready(wte.offset, wte.offset + wte.size);
  }
}

template <TrainElement T>
std::span<const T> Gpt<T>::output() const {
  if (!has_forward_) return {};
  const auto [b0, b1] = blocks_of(acts_.range, static_cast<int>(config_.layers));
  return acts_.x[static_cast<std::size_t>(b1)];
}

template <TrainElement T>
std::span<const T> Gpt<T>::input_grad() const {
  if (!has_forward_ || acts_.range.begin == 0) return {};
  return dx_;
}

template <TrainElement T>
std::int64_t Gpt<T>::activation_bytes(UnitRange range, std::int64_t batch,
                                      std::int64_t seq_len) const {
  const ModelConfig& c = config_;
  const int U = static_cast<int>(units_.size());
  DTW_CHECK_ARG(0 <= range.begin && range.begin < range.end && range.end <= U,
                "Gpt::activation_bytes: unit range [" << range.begin << ", " << range.end
                                                      << ") is empty or outside [0, " << U << ")");
  const std::int64_t stream = stream_len(shard_, seq_len, "Gpt::activation_bytes");
  const BlockDims d = shard_dims(c, shard_, batch, stream);
  // N tokens; n rows of the residual stream (N unless the seams cut it).
  const std::int64_t N = batch * seq_len, n = batch * stream, C = c.dim, F = d.mlp_hidden,
                     V = vocab_rows(c, shard_);
  const std::int64_t W = d.width();
  const auto [b0, b1] = blocks_of(range, static_cast<int>(c.layers));
  const bool first = range.begin == 0, last = range.end == U;
  // Per block, on the residual's n rows: ln1, mid, ln2 [n, C] and two
  // mean/rstd pairs [n]. Each sublayer works on the rows its seams' enter
  // makes (Megatron-SP: the whole sequence) and keeps at that count: the
  // attention its input when enter made a new one and will not make it
  // again in the backward [Na, C], qkv [Na, 3W],
  // q, k, v, per_head, merged [Na, W] and the core's cache (plain: probs
  // [B, H, Sa, Sa]); the MLP its new input (likewise) [Nm, C], pre and act
  // [Nm, F].
  Seams<T>& seams = seams_ != nullptr ? *seams_ : identity_seams<T>();
  const SublayerInput at = seams.sublayer_input(Site::kAttention, stream),
                      mp = seams.sublayer_input(Site::kMlp, stream),
                      hd = seams.sublayer_input(Site::kHead, stream);
  const std::int64_t Na = batch * at.seq, Nm = batch * mp.seq;
  const std::int64_t core =
      seams.attention().cache_elements({batch, d.heads, at.seq, at.seq, d.head_dim});
  // A new input is kept unless the seams enter again in the backward.
  auto kept = [&](const SublayerInput& in, std::int64_t rows) {
    return in.new_buffer && !in.enter_again ? rows * C : 0;
  };
  const std::int64_t attention = kept(at, Na) + 3 * Na * W + 5 * Na * W + core;
  const std::int64_t mlp = kept(mp, Nm) + 2 * Nm * F;
  const std::int64_t per_block = 3 * n * C + 4 * n + attention + mlp;
  std::int64_t values = (b1 - b0 + 1) * n * C + (b1 - b0) * per_block;
  // The head: ln [n, C], mean and rstd [n]; on every token, its input when
  // enter made a new one it keeps [N, C], logits and probs [N, V], losses [N].
  if (last) values += n * C + 2 * n + kept(hd, N) + 2 * N * V + N;
  const std::int64_t ids = (first ? N : 0) + (last ? N : 0);  // tokens, targets
  return values * static_cast<std::int64_t>(sizeof(T)) +
         ids * static_cast<std::int64_t>(sizeof(std::int32_t));
}

template <TrainElement T>
void Gpt<T>::release_activations() {
  acts_ = GptActivations<T>();
  has_forward_ = false;
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace dtw::model
