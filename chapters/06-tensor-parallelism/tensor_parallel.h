#pragma once
/// @file
/// Chapter 06 — tensor parallelism (Megatron): the contract the lab fills in.
///
/// t ranks of a group split every layer of the GPT between them: the first
/// matrix of each sublayer by its output features (column-parallel), the
/// second by its input features (row-parallel), the attention by heads and
/// the embedding and the loss by vocabulary rows. Every rank sees the whole
/// batch; the partial results meet in one allreduce per sublayer forward and
/// one backward. With Megatron's sequence parallelism (SP) the norms and the
/// residual stream between the sublayers are cut along the sequence instead
/// of repeated, and each allreduce becomes a reduce-scatter and an allgather.
///
/// Conventions: activations are row-major [rows, width] with rows =
/// batch·seq, sequence-major (row b·seq + s); weights are [out, in] as in
/// model/gpt_layers.h; forward functions overwrite their outputs, backward
/// functions overwrite the input gradient and *add* (+=) to the parameter
/// gradients. e is the bytes per value, t the group's size. Every function
/// here is collective over `group`: all its ranks call it with the same
/// sizes. Bytes "on the wire" are what each rank sends, for chapter 01's ring
/// collectives: an allreduce of n values sends 2(t−1)/t·n·e, an allgather
/// or reduce-scatter of n values in all (t−1)/t·n·e.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtw/array.h"
#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/model/attention_core.h"
#include "dtw/model/config.h"
#include "dtw/model/gpt_layers.h"
#include "dtw/model/seams.h"
#include "dtw/model/shard.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"

namespace dtw::ch06 {

// ---- the slices ------------------------------------------------------------------

/// Slice r of t of a dimension of `extent` (heads, hidden units): the equal
/// part [r·extent/t, (r+1)·extent/t). Throws InvalidArgument naming the rank,
/// `what`, the extent and t when t does not divide the extent ("rank 1: 4
/// heads do not split over t = 3 ranks") or r is outside [0, t).
model::IndexRange even_slice(std::int64_t extent, int r, int t, const char* what);

/// Slice r of t of a vocabulary of `vocab` rows, as even as possible: the
/// first vocab % t ranks hold one row more. No padding: a vocabulary that
/// does not divide is cut unevenly rather than padded with rows that would
/// have to be kept out of the softmax (the padding pitfall).
model::IndexRange vocab_slice(std::int64_t vocab, int r, int t);

/// Rank r of t's share of `config`: heads and hidden units by even_slice,
/// the vocabulary by vocab_slice (or whole when `cut_vocab` is false).
model::ModelShard megatron_shard(const model::ModelConfig& config, int r, int t,
                                 bool cut_vocab = true);

// ---- 06.1: Megatron's f and g ----------------------------------------------------

/// f before a tensor-parallel region, forward: the identity (every rank
/// already holds the whole input x). No message.
template <TrainElement T>
void f_forward(Comm& group, std::span<const T> x);
/// f backward: each rank's dx is the gradient through its own slice only;
/// the gradient of the input is their sum: an allreduce (sum) in place.
/// 2(t−1)/t·|dx|·e bytes.
template <TrainElement T>
void f_backward(Comm& group, std::span<T> dx);
/// g after a tensor-parallel region, forward: each rank holds a partial sum
/// of the output; the output is their sum: an allreduce (sum) in place.
/// 2(t−1)/t·|y|·e bytes.
template <TrainElement T>
void g_forward(Comm& group, std::span<T> y);
/// g backward: the identity (the gradient of a sum reaches every term
/// unchanged). No message.
template <TrainElement T>
void g_backward(Comm& group, std::span<const T> dy);

// ---- 06.2: column- and row-parallel linear ---------------------------------------

/// The sizes of one linear layer y = x Wᵀ + b as a rank sees it.
struct LinearDims {
  std::int64_t rows = 0;  ///< batch·seq
  std::int64_t in = 0;    ///< input features this rank multiplies (whole for column, in/t for row)
  std::int64_t out = 0;   ///< output features this rank produces (out/t for column, whole for row)
};

/// Column-parallel forward: y_local = f(x) W_localᵀ + b_local with x [rows,
/// in] whole on every rank, W_local [out, in] = the rank's rows of W (its
/// output features), b_local [out] the same rows of b (null: no bias), and
/// y_local [rows, out] the rank's columns of y. No message.
template <TrainElement T>
void column_parallel_forward(Comm& group, T* y_local, const T* x, const T* w_local,
                             const T* b_local, const LinearDims& d);
/// Column-parallel backward: dW_local += dy_localᵀ x, db_local += Σ dy_local
/// (skipped when null), dx = Σ over ranks of dy_local W_local (f's backward).
/// One allreduce of rows·in values: 2(t−1)/t·rows·in·e bytes.
template <TrainElement T>
void column_parallel_backward(Comm& group, T* dx, T* dw_local, T* db_local, const T* dy_local,
                              const T* x, const T* w_local, const LinearDims& d);
/// Row-parallel forward: y = g(x_local W_localᵀ) + b with x_local [rows, in]
/// the rank's columns of the input, W_local [out, in] the matching column
/// block of W, b [out] whole (replicated) and added once, after the sum (null:
/// no bias). y [rows, out] whole on every rank. One allreduce of rows·out
/// values: 2(t−1)/t·rows·out·e bytes.
template <TrainElement T>
void row_parallel_forward(Comm& group, T* y, const T* x_local, const T* w_local, const T* b,
                          const LinearDims& d);
/// Row-parallel backward: dy [rows, out] is whole on every rank (g's
/// backward); dx_local = dy W_local, dW_local += dyᵀ x_local, db += Σ dy
/// (every rank computes the same db; skipped when null). No message.
template <TrainElement T>
void row_parallel_backward(Comm& group, T* dx_local, T* dw_local, T* db, const T* dy,
                           const T* x_local, const T* w_local, const LinearDims& d);

// ---- 06.3: the parallel MLP ------------------------------------------------------

/// A rank's MLP weights (or their gradients): fc's rows [f0, f1) and its
/// bias's, proj's columns [f0, f1), and proj's bias whole (replicated). The
/// model's own struct, so `model::block_weights(layout, layer, base).mlp` of
/// a shard's layout is one.
template <class T>
using MlpSlice = model::MlpWeights<T>;

/// What the parallel MLP keeps for its backward: the pre-activation and the
/// GELU's output on the rank's hidden units, [rows, hidden_local] each.
template <class T>
struct MlpActivations {
  std::vector<T> pre;  ///< x W_fcᵀ + b_fc on the rank's hidden units
  std::vector<T> act;  ///< GELU(pre)
};

/// Parallel MLP forward: y = proj(GELU(fc(x))) + b_proj with fc
/// column-parallel and proj row-parallel, x and y [rows, dim] whole on every
/// rank. The GELU is element-wise, so it runs on the rank's slice of the
/// hidden units without any message: one allreduce of rows·dim values in
/// all. Fills `cache`.
template <TrainElement T>
void parallel_mlp_forward(Comm& group, T* y, MlpActivations<T>& cache, const T* x,
                          const MlpSlice<const T>& w, std::int64_t rows, std::int64_t dim,
                          std::int64_t hidden_local);
/// Parallel MLP backward: dx [rows, dim] whole on every rank, gradients
/// added to `grads` (the slice's and, on every rank, proj's bias). One
/// allreduce of rows·dim values.
template <TrainElement T>
void parallel_mlp_backward(Comm& group, T* dx, const MlpSlice<T>& grads, const T* dy, const T* x,
                           const MlpActivations<T>& cache, const MlpSlice<const T>& w,
                           std::int64_t rows, std::int64_t dim, std::int64_t hidden_local);

// ---- 06.4: parallel attention ----------------------------------------------------

/// A rank's attention weights (or gradients): the q, k and v rows of its
/// heads (qkv_weight [3·heads_local·head_dim, dim] as [q; k; v] of its
/// heads, and their biases), the output projection's columns of those heads,
/// and its bias whole (replicated). The model's own struct, as MlpSlice.
template <class T>
using AttentionSlice = model::AttentionWeights<T>;

/// The shape a rank's attention runs on.
struct AttentionDims {
  std::int64_t batch = 0;        ///< sequences
  std::int64_t seq = 0;          ///< tokens per sequence (the whole sequence)
  std::int64_t dim = 0;          ///< the residual width C
  std::int64_t heads_local = 0;  ///< heads on this rank: heads / t
  std::int64_t head_dim = 0;     ///< C / heads
  std::int64_t rows() const { return batch * seq; }                 ///< batch·seq
  std::int64_t width() const { return heads_local * head_dim; }     ///< heads_local·head_dim
};

/// What the parallel attention keeps for its backward.
template <class T>
struct AttentionActivations {
  std::vector<T> qkv;     ///< [rows, 3·width]: the rank's q, k, v before the split
  std::vector<T> q, k, v; ///< [batch, heads_local, seq, head_dim] each
  std::vector<T> per_head;  ///< the core's output, [batch, heads_local, seq, head_dim]
  std::vector<T> merged;    ///< per_head merged back to [rows, width]
  model::CoreCache<T> core; ///< the core's own cache
};

/// Parallel attention forward: the rank's heads attend on their own (heads
/// never mix inside the core), so qkv is column-parallel, the core runs on
/// heads_local heads, and the output projection is row-parallel: y = g(...)
/// + b_proj, one allreduce of rows·dim values. Causal attention over the
/// whole sequence (`core`: model::PlainAttention).
template <TrainElement T>
void parallel_attention_forward(Comm& group, T* y, AttentionActivations<T>& cache, const T* x,
                                const AttentionSlice<const T>& w, const AttentionDims& d,
                                model::AttentionCore<T>& core);
/// Parallel attention backward: one allreduce of rows·dim values (f's
/// backward at the input).
template <TrainElement T>
void parallel_attention_backward(Comm& group, T* dx, const AttentionSlice<T>& grads, const T* dy,
                                 const T* x, const AttentionActivations<T>& cache,
                                 const AttentionSlice<const T>& w, const AttentionDims& d,
                                 model::AttentionCore<T>& core);

// ---- 06.5: vocabulary-parallel embedding and cross-entropy -----------------------

/// Vocabulary-parallel embedding forward: x [rows, dim] = wte[token] for
/// every token, where the rank holds rows [v0, v0 + vocab_local) of wte
/// (wte_local [vocab_local, dim]). Each rank looks up the tokens in its
/// slice and writes zeros for the others; g sums them: one allreduce of
/// rows·dim values.
template <TrainElement T>
void vocab_parallel_embedding_forward(Comm& group, T* x, const std::int32_t* tokens,
                                      const T* wte_local, std::int64_t v0,
                                      std::int64_t vocab_local, std::int64_t rows,
                                      std::int64_t dim);
/// Its backward: dwte_local[token − v0] += dx[row] for the rank's tokens.
/// dx is whole on every rank (g's backward): no message.
template <TrainElement T>
void vocab_parallel_embedding_backward(Comm& group, T* dwte_local, const T* dx,
                                       const std::int32_t* tokens, std::int64_t v0,
                                       std::int64_t vocab_local, std::int64_t rows,
                                       std::int64_t dim);

/// Vocabulary-parallel cross-entropy: logits_local [rows, vocab_local] are
/// the rank's columns [v0, v0 + vocab_local) of the logits. Returns the mean
/// over rows of −log softmax(logits)[target] and writes dlogits_local =
/// (softmax − onehot(target)) / rows on the rank's columns. The logits are
/// never gathered: two allreduces, one of the row maxima (max, rows values)
/// and one of [Σ exp(logit − max); the target's logit] (sum, 2·rows
/// values). Every rank returns the same loss.
template <TrainElement T>
double vocab_parallel_cross_entropy(Comm& group, T* dlogits_local, const T* logits_local,
                                    const std::int32_t* targets, std::int64_t v0,
                                    std::int64_t vocab_local, std::int64_t rows);

// ---- the seams: 06.1 and 06.5 in the GPT ------------------------------------------

/// Megatron's collectives where the GPT calls its seams (model/seams.h):
/// this is what `dtw train --strategy tp` runs. The model's own blocks
/// compute on the rank's slices (its heads, hidden units and vocabulary
/// rows) and call, at every site (the embedding, each block's attention and
/// MLP, the head): forward, enter(x) on the input of the cut matrices
/// before the sublayer and leave(y) on their partial output after it;
/// backward, leave_backward(dy) on the gradient at what leave returned,
/// then enter_backward(dx) on this rank's gradient at what enter returned.
/// A seam returns the span the model goes on with: the argument itself
/// (changed in place or not) or `buffer`, which the seam may resize and
/// fill. Which of f and g (and of their backwards) each seam is, is this
/// step's lesson: derive it from the text's f/g explanation. vocab_max and
/// vocab_sum are the two allreduces of the vocabulary-parallel loss (in
/// place: rows maxima with max, then the 2·rows sums with sum). Every site
/// is cut.
template <TrainElement T>
class MegatronSeams : public model::Seams<T> {
 public:
  /// Seams over `group` (kept by reference).
  explicit MegatronSeams(Comm& group) : group_(group) {}
  /// Forward, before the sublayer: x is its input as this rank holds it.
  std::span<const T> enter(model::Site site, int layer, std::span<const T> x,
                           kernels::Vector<T>& buffer) override;
  /// Forward, after the sublayer: y is this rank's output of its slices.
  std::span<const T> leave(model::Site site, int layer, std::span<T> y,
                           kernels::Vector<T>& buffer) override;
  /// Backward of leave: dy is the gradient at what leave returned.
  std::span<const T> leave_backward(model::Site site, int layer, std::span<const T> dy,
                                    kernels::Vector<T>& buffer) override;
  /// Backward of enter: dx is this rank's gradient at what enter returned.
  std::span<const T> enter_backward(model::Site site, int layer, std::span<T> dx,
                                    kernels::Vector<T>& buffer) override;
  /// The row maxima over every vocabulary slice (allreduce max).
  void vocab_max(std::span<T> row_max) override;
  /// The row sums over every vocabulary slice (allreduce sum).
  void vocab_sum(std::span<T> row_sums) override;

 protected:
  Comm& group_;  ///< the tensor-parallel group
};

// ---- 06.6: Megatron sequence parallelism -------------------------------------------

/// All-gather along the sequence: local [batch, seq/t, dim] (this rank's
/// contiguous token range of every sequence) → whole [batch, seq, dim] on
/// every rank, row (b, q·seq/t + i) from rank q's row (b, i). One allgather:
/// (t−1)/t·batch·seq·dim·e bytes. seq must divide by t.
template <TrainElement T>
void sequence_allgather(Comm& group, std::span<T> whole, std::span<const T> local,
                        std::int64_t batch, std::int64_t seq, std::int64_t dim);
/// Reduce-scatter along the sequence: whole [batch, seq, dim] holds this
/// rank's partial sums; local [batch, seq/t, dim] receives the sum over the
/// ranks of this rank's token range. One reduce-scatter: (t−1)/t·
/// batch·seq·dim·e bytes. `whole` is scratch afterwards.
template <TrainElement T>
void sequence_reduce_scatter(Comm& group, std::span<T> local, std::span<T> whole,
                             std::int64_t batch, std::int64_t seq, std::int64_t dim);

/// Megatron-SP's seams: between the embedding and the head each rank holds
/// only its own tokens of the residual stream; around every cut matrix
/// (a block's sublayers, the vocabulary-parallel embedding and head) the
/// ranks need what Megatron (06.1) needs. Which sequence collective (or
/// none) each seam is at each site is this step's lesson (the text's
/// "Megatron sequence parallelism (SP)"). The model calls enter, leave and
/// their backwards at each block's attention and MLP, only leave and
/// leave_backward at the embedding and only enter and enter_backward at the
/// head; a seam at a site where neither f nor g stood returns its input
/// unchanged. The model is given whole sequences and the shard says the
/// seams cut them (ModelShard::cut_by_seams). The loss's vocab_max and
/// vocab_sum are MegatronSeams' (06.5).
template <TrainElement T>
class SequenceParallelSeams : public MegatronSeams<T> {
 public:
  /// Seams over `group` for batches of `batch` sequences of `seq` tokens
  /// (the whole sequence) of width `dim`.
  SequenceParallelSeams(Comm& group, std::int64_t batch, std::int64_t seq, std::int64_t dim)
      : MegatronSeams<T>(group), batch_(batch), seq_(seq), dim_(dim) {}
  /// Forward, before the sublayer (see MegatronSeams).
  std::span<const T> enter(model::Site site, int layer, std::span<const T> x,
                           kernels::Vector<T>& buffer) override;
  /// Forward, after the sublayer: returns the rank's own tokens.
  std::span<const T> leave(model::Site site, int layer, std::span<T> y,
                           kernels::Vector<T>& buffer) override;
  /// Backward of leave: returns as many rows as enter returned.
  std::span<const T> leave_backward(model::Site site, int layer, std::span<const T> dy,
                                    kernels::Vector<T>& buffer) override;
  /// Backward of enter: returns the rank's own tokens.
  std::span<const T> enter_backward(model::Site site, int layer, std::span<T> dx,
                                    kernels::Vector<T>& buffer) override;
  /// In a block and at the head, the sublayer sees the whole sequence, t
  /// times the stream's tokens, in enter's buffer, which the model drops
  /// after the forward: the backward calls enter again (Megatron's second
  /// all-gather). What Gpt::activation_bytes charges for the caches.
  model::SublayerInput sublayer_input(model::Site site, std::int64_t seq) const override;

 protected:
  using MegatronSeams<T>::group_;   // the tensor-parallel group
  std::int64_t batch_, seq_, dim_;  ///< the shape of the whole activations
};

/// Megatron-SP's last step: a replicated tensor (the norms, the row-parallel
/// biases, wpe and the final norm) got a gradient from this rank's tokens
/// only; the sum over the group is the gradient of the
/// whole batch. Packs every replicated tensor's gradient into `buffer`
/// (resized to their total, R values), allreduces it once and writes the
/// sums back. 2(t−1)/t·R·e bytes. The gradients live on the rank's Place
/// (group.exec().place(): the host, or its GPU), and so must `buffer`:
/// pack and unpack with kernels::copy_values on that Place.
template <TrainElement T>
void reduce_replicated_grads(Comm& group, train::Replica<T>& replica, kernels::Vector<T>& buffer);

// ---- the strategies ----------------------------------------------------------------

/// Deliberate mistakes from the field, for `dtw run pitfall` (all false in a
/// correct run).
struct Faults {
  bool norm_grads_not_reduced = false;  ///< SP: the norms' gradients not summed over the group
  bool clip_counts_copies = false;      ///< the clipping norm sums every rank's replicated copies
  bool local_vocab_statistics = false;  ///< the loss from this rank's vocabulary slice only
  bool pad_vocabulary = false;          ///< vocabulary padded to t·⌈V/t⌉, pad rows in the softmax
};

/// `tp`: Megatron tensor parallelism over the whole world (t = p): every rank
/// trains megatron_shard(config, r, t) on the whole batch through
/// MegatronSeams, clips by clip_sum_of_squares (each replicated tensor
/// counted once), steps, and checks after every step that the replicated tensors are
/// still equal on every rank. Throws InvalidArgument naming the rank and the
/// values when heads or hidden units do not divide by p.
template <TrainElement T>
void tensor_parallel(train::RankRun<T>& run, const Faults& faults = {});

/// `tp-sp`: the same slices as tp with Megatron-SP: every rank is given the
/// whole batch and holds the tokens [r·T/t, (r+1)·T/t) of every sequence
/// between the embedding and the head (SequenceParallelSeams,
/// ModelShard::cut_by_seams); its loss is the batch's, as under tp; the
/// replicated tensors' gradients are summed over the group
/// (reduce_replicated_grads) before the clip. Also needs T divisible by p.
template <TrainElement T>
void tensor_parallel_sp(train::RankRun<T>& run, const Faults& faults = {});

/// The clipping norm's square for both strategies: Σ g² over every gradient
/// of the model, summed over the group (one allreduce of one double; every
/// rank returns the same value, which `replica.clip` takes). The slices of a
/// cut tensor are disjoint, so their squares add up; a replicated tensor
/// (replica.plan().replicated) is held whole, equal, by every rank and
/// counts once: on the group's first rank only. Counting every copy makes
/// the norm too large and the clip too strong (torchtune#2420). Collective.
template <TrainElement T>
double clip_sum_of_squares(Comm& group, train::Replica<T>& replica);

/// What both strategies check first, on every rank (rank −1: before any rank
/// runs, the message names no rank): the model is a GPT and its heads and
/// hidden units divide by `ranks` (and with `sp` its sequence too).
void check_tp_run(const train::RunSpec& spec, int ranks, int rank, bool sp);

// ---- formulas (the chapter text's cost model) ----------------------------------------

/// Parameters a rank holds: sliced tensors' share plus every replicated
/// tensor whole (param_layout(config, megatron_shard(config, r, t, cut_vocab)).size()).
std::int64_t params_per_rank(const model::ModelConfig& config, int r, int t, bool cut_vocab);
/// Of those, the replicated ones (the norms, the row-parallel biases, wpe,
/// and wte/head when the vocabulary is whole).
std::int64_t replicated_params(const model::ModelConfig& config, bool cut_vocab);
/// Activation bytes rank r of `tp` keeps from its forward to its backward on
/// a batch of `batch` sequences of `seq` tokens (the chapter text derives
/// it): per block the input, both norms' outputs, the residual midpoint and
/// four per-row statistics whole, and the q/k/v, head outputs, attention
/// probabilities and MLP hidden units of the rank's heads and units only;
/// then the head's norm, the rank's columns of the logits and softmax, and
/// the token ids.
std::int64_t tp_activation_bytes(const model::ModelConfig& config, std::int64_t batch,
                                 std::int64_t seq, int r, int t, std::int64_t element_bytes);
/// Activation bytes rank r of `tp-sp` keeps on a batch of `batch` sequences
/// of `seq` tokens (the chapter text derives it): what lives between the
/// sublayers -- every block's input, both norms' outputs and their per-row
/// statistics, the residual midpoint, the final norm and its statistics --
/// for the rank's seq/t tokens only; everything a sublayer keeps (q/k/v,
/// head outputs, probabilities, MLP hidden units) and the head's logits,
/// softmax and per-row losses, for the whole sequence on the rank's heads,
/// units and vocabulary columns; the token and target ids of the whole
/// batch. Not the all-gathered inputs of the sublayers and the head: the
/// backward gathers them again.
std::int64_t tp_sp_activation_bytes(const model::ModelConfig& config, std::int64_t batch,
                                    std::int64_t seq, int r, int t, std::int64_t element_bytes);
/// Values rank r sends in one ring allreduce of n values over t ranks
/// (chapter 01's chunks: 2n − chunk(r) − chunk(r+1); 2(t−1)/t·n when t divides n).
std::int64_t ring_allreduce_values(std::int64_t n, int r, int t);
/// Bytes rank r sends per training step of `tp` (sp false) or `tp-sp` (sp
/// true) on a batch of `batch` sequences of `seq` tokens, values of
/// `element_bytes` bytes (the loss and the clipping norm travel as doubles).
std::int64_t bytes_per_step(const model::ModelConfig& config, std::int64_t batch,
                            std::int64_t seq, int r, int t, bool sp, std::int64_t element_bytes);
/// Collectives per step: {allreduces, allgathers, reduce-scatters}.
struct CollectiveCount {
  std::int64_t allreduces = 0;      ///< allreduce calls
  std::int64_t allgathers = 0;      ///< allgather calls
  std::int64_t reduce_scatters = 0; ///< reduce-scatter calls
};
/// The collectives one step of `tp` or `tp-sp` makes.
CollectiveCount collectives_per_step(const model::ModelConfig& config, bool sp);
/// Messages each rank sends per step: a ring allreduce is 2(t−1) messages,
/// a ring allgather or reduce-scatter t−1.
std::int64_t messages_per_step(const model::ModelConfig& config, int t, bool sp);

}  // namespace dtw::ch06
