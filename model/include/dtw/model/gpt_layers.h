#pragma once
/// @file
/// The GPT's layers as free functions, each with an explicit backward pass.
///
/// Gpt<T> (gpt.h) composes these; the parallel chapters compose them
/// differently: a pipeline stage runs a range of blocks, tensor parallelism
/// calls the attention and MLP sublayers on its slice of heads and hidden
/// units (passing its own slices of the weights and fewer heads in
/// BlockDims), sequence parallelism runs the embedding with a position offset
/// and the attention core on exchanged heads.
///
/// Conventions (those of the kernels, activations.h): activations are
/// row-major [rows, width] with rows = batch·seq (sequence-major: row b·seq+t
/// is token t of sequence b); forward functions overwrite their outputs and
/// fill a cache for the backward pass; backward functions *overwrite* the
/// gradient of their input and *accumulate* (+=) parameter gradients. Backward
/// passes take a caller-owned scratch buffer of at least the size the matching
/// `*_scratch_size` function returns. Every function is safe to call from many
/// rank threads at once on distinct caches and scratch. An optional
/// LayerTimes records time per kind of layer (profile.h).
///
/// Every kernel call goes through a `kernels::Place` (dtw/kernels/place.h):
/// the trailing `at` of the linear layers, permutes and sublayers, the
/// `place` of BlockSeams and EndSeams; the host by default. Every tensor a
/// call is given must live there, token ids and targets included; the
/// caches (kernels::Vector) and the seams' buffers are put there by the
/// layers themselves. Token ids are checked only on the host: on a device
/// whoever copied them there checks them first (Gpt::forward does).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/attention_core.h"
#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"
#include "dtw/model/seams.h"
#include "dtw/types.h"

namespace dtw::model {

// ---------------------------------------------------------------------------
// Linear layers and head permutes

/// `y = x Wᵀ + b`: x [rows, in], W [out, in], b [out] (nullptr: no bias), y [rows, out],
/// all on `at`.
template <TrainElement T>
void linear_forward(T* y, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t in,
                    std::int64_t out, LayerTimes* times = nullptr,
                    const kernels::Place& at = kernels::Place::host());

/// `dx = dy W` (overwritten; skipped when dx is nullptr), `dW += dyᵀ x`,
/// `db += Σ_rows dy` (skipped when db is nullptr); on `at`.
template <TrainElement T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, std::int64_t rows,
                     std::int64_t in, std::int64_t out, LayerTimes* times = nullptr,
                     const kernels::Place& at = kernels::Place::host());

/// qkv [batch·seq, 3·heads·head_dim] (columns [q; k; v], heads contiguous in
/// each) → q, k, v [batch, heads, seq, head_dim], the layout attention wants
/// (kernels::split_qkv on `at`).
template <TrainElement T>
void split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t head_dim,
               const kernels::Place& at = kernels::Place::host());
/// The inverse of split_qkv (used on gradients: dq, dk, dv → dqkv).
template <TrainElement T>
void join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim,
              const kernels::Place& at = kernels::Place::host());
/// [batch, heads, seq, head_dim] → [batch·seq, heads·head_dim].
template <TrainElement T>
void merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim, const kernels::Place& at = kernels::Place::host());
/// The inverse of merge_heads.
template <TrainElement T>
void split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim, const kernels::Place& at = kernels::Place::host());

/// Told by a backward pass that one parameter tensor's gradient is final for
/// this pass: `grad` is its first element (a pointer into the gradients the
/// caller passed), `count` its elements. The GPT reports each block tensor
/// through this as soon as its backward is done, which is what lets DDP start
/// a bucket's allreduce in the middle of a block (units.h, GradReady). An
/// empty function is never called.
template <class T>
using GradFinal = std::function<void(const T* grad, std::int64_t count)>;

// ---------------------------------------------------------------------------
// Sizes and weights of one transformer block

/// The sizes one block call works on.
struct BlockDims {
  std::int64_t batch = 0;       ///< sequences
  std::int64_t seq = 0;         ///< tokens per sequence
  std::int64_t dim = 0;         ///< residual width C (never split)
  std::int64_t heads = 0;       ///< heads this call computes (a TP rank's share, or all)
  std::int64_t head_dim = 0;    ///< D
  std::int64_t mlp_hidden = 0;  ///< MLP units this call computes (a TP rank's share, or all)
  /// batch · seq: the rows of every [rows, width] activation.
  std::int64_t rows() const { return batch * seq; }
  /// heads · head_dim: the width of q, k, v and of the attention output.
  std::int64_t width() const { return heads * head_dim; }
};

/// The dims of a whole (unsplit) block of `config` for batch×seq tokens.
BlockDims block_dims(const ModelConfig& config, std::int64_t batch, std::int64_t seq);

/// Pointers to an attention sublayer's tensors: `AttentionWeights<const T>`
/// for parameters, `AttentionWeights<T>` for their gradients. Shapes for
/// BlockDims d: qkv_weight [3·d.width(), d.dim], qkv_bias [3·d.width()],
/// proj_weight [d.dim, d.width()], proj_bias [d.dim] (nullptr: no bias added,
/// as a row-parallel rank adds it once after the allreduce).
template <class T>
struct AttentionWeights {
  T* qkv_weight = nullptr;   ///< [3·width, dim]: rows [q; k; v]
  T* qkv_bias = nullptr;     ///< [3·width]
  T* proj_weight = nullptr;  ///< [dim, width]: heads back to the residual stream
  T* proj_bias = nullptr;    ///< [dim], or nullptr
};

/// Pointers to an MLP sublayer's tensors: fc_weight [d.mlp_hidden, d.dim],
/// fc_bias [d.mlp_hidden], proj_weight [d.dim, d.mlp_hidden], proj_bias [d.dim]
/// (nullptr: no bias added).
template <class T>
struct MlpWeights {
  T* fc_weight = nullptr;    ///< [mlp_hidden, dim]: expands to the hidden units
  T* fc_bias = nullptr;      ///< [mlp_hidden]
  T* proj_weight = nullptr;  ///< [dim, mlp_hidden]: back to the residual stream
  T* proj_bias = nullptr;    ///< [dim], or nullptr
};

/// Pointers to all tensors of one block.
template <class T>
struct BlockWeights {
  T* ln1_gamma = nullptr;    ///< [dim]: gain of the norm before attention
  T* ln1_beta = nullptr;     ///< [dim]: shift of the norm before attention
  AttentionWeights<T> attn;  ///< the attention sublayer
  T* ln2_gamma = nullptr;    ///< [dim]: gain of the norm before the MLP
  T* ln2_beta = nullptr;     ///< [dim]: shift of the norm before the MLP
  MlpWeights<T> mlp;         ///< the MLP sublayer
};

/// The tensors of block `layer` inside a flat buffer laid out as `layout`
/// (T = const float for parameters, float for gradients, likewise double).
template <class T>
BlockWeights<T> block_weights(const ParamLayout& layout, int layer, T* base) {
  const std::string h = "h." + std::to_string(layer) + ".";
  auto at = [&](const char* name) { return base + layout.find(h + name).offset; };
  BlockWeights<T> w;
  w.ln1_gamma = at("ln1.gamma");
  w.ln1_beta = at("ln1.beta");
  w.attn = {at("attn.qkv.weight"), at("attn.qkv.bias"), at("attn.proj.weight"),
            at("attn.proj.bias")};
  w.ln2_gamma = at("ln2.gamma");
  w.ln2_beta = at("ln2.beta");
  w.mlp = {at("mlp.fc.weight"), at("mlp.fc.bias"), at("mlp.proj.weight"), at("mlp.proj.bias")};
  return w;
}

// ---------------------------------------------------------------------------
// Attention and MLP sublayers, and the block

/// What the attention sublayer keeps for its backward pass.
template <class T>
struct AttentionCache {
  kernels::Vector<T> qkv;  ///< [rows, 3·width]
  /// @var q
  /// queries [batch, heads, seq, head_dim]
  /// @var k
  /// keys [batch, heads, seq, head_dim]
  kernels::Vector<T> q, k, v;  ///< values [batch, heads, seq, head_dim]
  CoreCache<T> core;        ///< what the attention core keeps (plain: the probabilities)
  kernels::Vector<T> per_head;  ///< attention output [batch, heads, seq, head_dim]
  kernels::Vector<T> merged;    ///< the same as [rows, width]: the projection's input
};

/// `y = proj(attention(split(x Wqkvᵀ + bqkv)))`: causal multi-head attention
/// of the (already normalised) x [rows, dim]; y [rows, dim] is overwritten.
/// `core` computes softmax(q kᵀ/√D) v (nullptr: PlainAttention) on tokens at
/// `positions` (nullptr: the whole sequence [0, seq)); `layer` is passed on
/// to the core. Runs on `at`, which must be the core's place
/// (AttentionCore::place(); InvalidArgument naming both otherwise).
template <TrainElement T>
void attention_sublayer_forward(T* y, AttentionCache<T>& cache, const T* x,
                                const AttentionWeights<const T>& w, const BlockDims& d,
                                LayerTimes* times = nullptr, AttentionCore<T>* core = nullptr,
                                const TokenRuns* positions = nullptr, int layer = -1,
                                const kernels::Place& at = kernels::Place::host());
/// Overwrites dx [rows, dim]; accumulates into grads and reports each
/// gradient tensor to `done` when it is final (the projection's first).
/// `core`, `positions`, `layer` and `at` must be the forward's.
template <TrainElement T>
void attention_sublayer_backward(T* dx, const AttentionWeights<T>& grads, const T* dy, const T* x,
                                 const AttentionCache<T>& cache, const AttentionWeights<const T>& w,
                                 const BlockDims& d, T* scratch, LayerTimes* times = nullptr,
                                 const GradFinal<T>& done = {}, AttentionCore<T>* core = nullptr,
                                 const TokenRuns* positions = nullptr, int layer = -1,
                                 const kernels::Place& at = kernels::Place::host());
/// Elements of scratch attention_sublayer_backward needs: 8·rows·width
/// (d_merged, d_per_head, dq, dk, dv, and dqkv at 3·width).
std::int64_t attention_sublayer_scratch_size(const BlockDims& d);

/// What the MLP sublayer keeps for its backward pass.
template <class T>
struct MlpCache {
  kernels::Vector<T> pre;  ///< x Wfcᵀ + bfc [rows, mlp_hidden], before GELU
  kernels::Vector<T> act;  ///< GELU(pre)
};

/// `y = GELU(x Wfcᵀ + bfc) Wprojᵀ + bproj` for x [rows, dim]; y overwritten; on `at`.
template <TrainElement T>
void mlp_sublayer_forward(T* y, MlpCache<T>& cache, const T* x, const MlpWeights<const T>& w,
                          const BlockDims& d, LayerTimes* times = nullptr,
                          const kernels::Place& at = kernels::Place::host());
/// Overwrites dx [rows, dim]; accumulates into grads and reports each
/// gradient tensor to `done` when it is final (the projection's first); on `at`.
template <TrainElement T>
void mlp_sublayer_backward(T* dx, const MlpWeights<T>& grads, const T* dy, const T* x,
                           const MlpCache<T>& cache, const MlpWeights<const T>& w,
                           const BlockDims& d, T* scratch, LayerTimes* times = nullptr,
                           const GradFinal<T>& done = {},
                           const kernels::Place& at = kernels::Place::host());
/// Elements of scratch mlp_sublayer_backward needs: rows·mlp_hidden (the
/// gradient at the hidden units).
std::int64_t mlp_sublayer_scratch_size(const BlockDims& d);

/// What a block keeps for its backward pass (besides its input, which the
/// caller keeps: it is the previous block's output).
template <class T>
struct BlockCache {
  /// @var ln1
  /// LN1(x_in) [rows, dim]: the attention sublayer's input
  /// @var ln1_mean
  /// per-row mean of x_in [rows]
  kernels::Vector<T> ln1, ln1_mean, ln1_rstd;  ///< per-row 1/std of x_in [rows]
  /// @var attn_in
  /// the attention sublayer's input when Seams::enter made a new one (else
  /// empty; empty too after the forward when the seams enter again in the
  /// backward, SublayerInput::enter_again)
  kernels::Vector<T> attn_in, mlp_in;      ///< the MLP's likewise
  AttentionCache<T> attn;                  ///< the attention sublayer's cache
  kernels::Vector<T> mid;                  ///< x_in + attention(LN1(x_in))
  /// @var ln2
  /// LN2(mid) [rows, dim]: the MLP sublayer's input
  /// @var ln2_mean
  /// per-row mean of mid [rows]
  kernels::Vector<T> ln2, ln2_mean, ln2_rstd;  ///< per-row 1/std of mid [rows]
  MlpCache<T> mlp;                         ///< the MLP sublayer's cache
};

/// Where a block is and which seams it calls (seams.h).
template <TrainElement T>
struct BlockSeams {
  Seams<T>* seams = nullptr;            ///< nullptr: identity_seams()
  int layer = -1;                       ///< the block's index, passed to the seams
  const TokenRuns* positions = nullptr;  ///< the tokens' positions (nullptr: [0, seq))
  /// Where the block's kernels run (its tensors and the seams' attention
  /// core must be there too).
  kernels::Place place = kernels::Place::host();
};

/// One pre-norm transformer block:
/// `mid = x_in + leave(attention(enter(LN1(x_in)))) + b_attn`,
/// `x_out = mid + leave(mlp(enter(LN2(mid)))) + b_mlp`, with the seams of
/// `at` (identity by default); the projections' biases are added after
/// leave, once. x_in and x_out are [rows, dim] and must not alias (x_in is
/// needed by the backward).
template <TrainElement T>
void block_forward(T* x_out, BlockCache<T>& cache, const T* x_in, const BlockWeights<const T>& w,
                   const BlockDims& d, LayerTimes* times = nullptr, const BlockSeams<T>& at = {});
/// Overwrites dx_in (which may alias dx_out); accumulates into grads and
/// reports each of the block's gradient tensors to `done` the moment it is
/// final: the MLP's (projection, then fc), LN2's, the attention's, LN1's; of
/// two finished together the one later in block_weights' order first (a
/// bias before its weight, β before γ).
template <TrainElement T>
void block_backward(T* dx_in, const BlockWeights<T>& grads, const T* dx_out, const T* x_in,
                    const BlockCache<T>& cache, const BlockWeights<const T>& w, const BlockDims& d,
                    T* scratch, LayerTimes* times = nullptr, const GradFinal<T>& done = {},
                    const BlockSeams<T>& at = {});
/// Elements of scratch block_backward needs: 2·rows·dim (gradients at a norm's
/// output and at mid) plus the larger sublayer scratch.
std::int64_t block_scratch_size(const BlockDims& d);

// ---------------------------------------------------------------------------
// Embedding and head

/// Where the embedding and the head sit in a shard (shard.h): the seams they
/// call, the vocabulary rows this rank's wte (and head) holds, and the
/// tokens' positions. The default is the whole model with identity seams.
template <TrainElement T>
struct EndSeams {
  Seams<T>* seams = nullptr;             ///< nullptr: identity_seams()
  IndexRange vocab;                      ///< vocabulary rows held (default: all)
  const TokenRuns* positions = nullptr;  ///< positions of the stream's tokens (nullptr: offset + t)
  /// Rows of the residual stream between the ends when the seams cut the
  /// sequence (ModelShard::cut_by_seams: the embedding's leave returns
  /// them, the head's enter gathers them back to one row per token); −1:
  /// one row per token.
  std::int64_t stream_rows = -1;
  /// What the head's enter makes (Seams::sublayer_input(kHead, ...)): a new
  /// buffer, and whether the head drops it and enters again in the backward.
  SublayerInput head_input;
  /// Where the ends' kernels run (their tensors and token ids must be there
  /// too; the positions are computed on the host and copied there).
  kernels::Place place = kernels::Place::host();
};

/// `x[b·seq + t] = leave(wte[tokens[b·seq + t]]) + wpe[position(t)]` for
/// batch×seq tokens; x is [batch·seq, dim]. position(t) is `at.positions`'
/// t-th position, or position_offset + t (a sequence shard starting
/// mid-sequence). A vocabulary slice looks up only the tokens in its rows
/// (the others' rows stay 0 until Seams::leave sums the slices); wte then has
/// the slice's rows. Token ids outside [0, vocab) and positions beyond the
/// context raise InvalidArgument naming the values. With `at.stream_rows`
/// set, leave keeps that many rows of the batch·seq looked up (the
/// stream's tokens of every sequence, whose positions `at.positions` lists)
/// and x is [stream_rows, dim].
template <TrainElement T>
void embed_forward(T* x, const std::int32_t* tokens, const T* wte, const T* wpe,
                   const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                   std::int64_t position_offset = 0, LayerTimes* times = nullptr,
                   const EndSeams<T>& at = {});
/// Accumulates dwte (the slice's rows) and dwpe from dx [batch·seq, dim]
/// (or [at.stream_rows, dim]); dx passes through Seams::leave_backward,
/// which returns batch·seq rows, before reaching dwte.
template <TrainElement T>
void embed_backward(T* dwte, T* dwpe, const T* dx, const std::int32_t* tokens,
                    const ModelConfig& config, std::int64_t batch, std::int64_t seq,
                    std::int64_t position_offset = 0, LayerTimes* times = nullptr,
                    const EndSeams<T>& at = {});

/// The final layer norm and the output projection (weight = wte when tied).
template <class T>
struct HeadWeights {
  T* lnf_gamma = nullptr;  ///< [dim]: gain of the final norm
  T* lnf_beta = nullptr;   ///< [dim]: shift of the final norm
  T* weight = nullptr;  ///< [vocab, dim]
};
/// The head's tensors inside a flat buffer laid out as `layout`; `tied`
/// (ModelConfig::tied_head) points weight at wte instead of head.weight.
template <class T>
HeadWeights<T> head_weights(const ParamLayout& layout, bool tied, T* base) {
  return {base + layout.find("lnf.gamma").offset, base + layout.find("lnf.beta").offset,
          base + layout.find(tied ? "wte" : "head.weight").offset};
}

/// What the head keeps for its backward pass.
template <class T>
struct HeadCache {
  /// @var ln
  /// LNf(x) [rows, dim]: the projection's input
  /// @var mean
  /// per-row mean of x [rows]
  kernels::Vector<T> ln, mean, rstd;  ///< per-row 1/std of x [rows]
  kernels::Vector<T> in;              ///< the projection's input when Seams::enter made one
  kernels::Vector<T> logits;          ///< [rows, vocab]
  kernels::Vector<T> probs;           ///< softmax(logits), when targets were given
  kernels::Vector<T> losses;          ///< per-row cross-entropy
};

/// `logits = enter(LNf(x)) Wᵀ`; with targets, also the per-row
/// cross-entropy; returns its mean over the rows (0 without targets:
/// inference). `vocab` is the rows of w.weight: with a vocabulary slice
/// (`at.vocab` not whole) the loss takes its row maxima and sums over every
/// slice from Seams::vocab_max and vocab_sum, and never gathers the logits;
/// probs and logits then hold the slice's columns. x has `at.stream_rows`
/// rows when set (else `rows`); enter(kHead) must return `rows` rows, one
/// per target, in a new buffer exactly when `at.head_input` says so.
template <TrainElement T>
T head_forward(HeadCache<T>& cache, const T* x, const std::int32_t* targets,
               const HeadWeights<const T>& w, std::int64_t rows, std::int64_t dim,
               std::int64_t vocab, LayerTimes* times = nullptr, const EndSeams<T>& at = {});
/// The gradient of `dloss · Σ_rows loss`: overwrites dx, accumulates into grads
/// (dloss = 1/rows for the mean loss; tied: grads.weight is dwte); the
/// gradient at the projection's input passes through Seams::enter_backward,
/// which returns as many rows as x has. With `at.head_input.enter_again`
/// it calls enter(kHead) again for the projection's input.
template <TrainElement T>
void head_backward(T* dx, const HeadWeights<T>& grads, const T* x, const std::int32_t* targets,
                   const HeadCache<T>& cache, const HeadWeights<const T>& w, std::int64_t rows,
                   std::int64_t dim, std::int64_t vocab, T dloss, T* scratch,
                   LayerTimes* times = nullptr, const EndSeams<T>& at = {});
/// Elements of scratch head_backward needs: rows·vocab (dlogits) + rows·dim
/// (gradient at LNf's output).
std::int64_t head_scratch_size(std::int64_t rows, std::int64_t dim, std::int64_t vocab);

}  // namespace dtw::model
