#pragma once
/// @file
/// The GPT: embedding → L transformer blocks → final norm → head → loss, with
/// an explicit backward pass, over a flat parameter buffer (params.h).
///
/// A Gpt<T> holds the activations of one forward pass (one micro-batch); the
/// parameters and gradients live outside it, so many Gpt objects (rank
/// threads, micro-batches in flight) can share one parameter buffer. The
/// layers themselves are in gpt_layers.h for chapters that compose them
/// differently, or run a stage of units (units.h) through the stage entry
/// points below.

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/config.h"
#include "dtw/model/gpt_layers.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"
#include "dtw/model/seams.h"
#include "dtw/model/shard.h"
#include "dtw/model/units.h"
#include "dtw/types.h"

namespace dtw::model {

/// Everything one forward pass keeps for its backward pass.
template <class T>
struct GptActivations {
  std::int64_t batch = 0;             ///< sequences in the micro-batch
  std::int64_t seq = 0;               ///< tokens per sequence (seq_len)
  /// tokens per sequence in the residual stream: seq, or the shard's part
  /// when the seams cut the sequence (ModelShard::cut_by_seams)
  std::int64_t stream = 0;
  kernels::Vector<std::int32_t> tokens;   ///< [batch, seq]
  kernels::Vector<std::int32_t> targets;  ///< [batch, seq] (empty: inference)
  /// The residual stream: x[0] is the embedding, x[l + 1] block l's output,
  /// x[layers] what the head reads; each [batch·stream, dim]. A stage keeps only
  /// the entries its units read or write; the others stay empty.
  std::vector<kernels::Vector<T>> x;
  std::vector<BlockCache<T>> blocks;  ///< one per block (empty outside the stage)
  HeadCache<T> head;                  ///< final norm, logits and loss
  UnitRange range;                    ///< the units the forward ran
};

/// A decoder-only transformer of a kGpt configuration, or one rank's shard of
/// it (shard.h): the same forward and backward run on a slice of the heads,
/// hidden units and vocabulary and on a range of each sequence's tokens,
/// calling the seams (seams.h) where a parallel strategy's collectives go.
template <TrainElement T>
class Gpt {
 public:
  /// Validates the configuration and the shard (InvalidArgument if bad or not
  /// a GPT). The parameters are laid out as param_layout(config, shard).
  explicit Gpt(const ModelConfig& config, const ModelShard& shard = ModelShard::whole());

  /// The configuration this model was built from.
  const ModelConfig& config() const { return config_; }
  /// The share of the model this object computes.
  const ModelShard& shard() const { return shard_; }
  /// Where each tensor lives in the flat params/grads buffers (the shard's
  /// local tensors; each view's slice places it in the whole tensor).
  const ParamLayout& layout() const { return layout_; }
  /// Where the collectives of a parallel strategy go (nullptr: the identity
  /// seams of a rank that holds the whole model). Must outlive the passes.
  void set_seams(Seams<T>* seams) { seams_ = seams; }
  /// Records per-layer-kind time into `times` from now on (nullptr: stop).
  void set_times(LayerTimes* times) { times_ = times; }
  /// Where every kernel of the passes runs (default: the host): each layer
  /// gets this Place (gpt_layers.h), so the parameters, gradients and
  /// x_in/dx_out passed must live there. The activations, caches and
  /// scratch (GptActivations: kernels::Vector) follow it, and so do the token
  /// ids and targets: forward() checks the host's ids, then copies them
  /// there. The host reads only the loss. Without seams the model's own identity core takes the
  /// Place; with seams (set_seams), their attention core must be placed by their owner
  /// (AttentionCore::set_place), or the block raises InvalidArgument.
  void set_place(const kernels::Place& at) {
    place_ = at;
    own_seams_.attention().set_place(at);
  }
  /// The Place set by set_place.
  const kernels::Place& place() const { return place_; }

  /// Runs the model on tokens [batch, seq_len] (row-major, ids in [0, vocab))
  /// and returns the mean next-token cross-entropy against targets [batch,
  /// seq_len]; keeps the activations for backward(). targets may be nullptr
  /// (inference: logits only, returns 0). seq_len counts this shard's tokens
  /// of each sequence (a sequence shard holds seq_len of the
  /// seq_len·sequence_shards of the whole sequence, at shard().positions());
  /// when the seams cut the sequence (ModelShard::cut_by_seams), seq_len is
  /// the whole sequence and the residual stream between the ends holds the
  /// shard's seq_len/sequence_shards tokens of each (x_in, output() and
  /// input_grad() too); 1 ≤ the whole length ≤ context and batch ≥ 1,
  /// otherwise InvalidArgument naming the values.
  T forward(const T* params, const std::int32_t* tokens, const std::int32_t* targets,
            std::int64_t batch, std::int64_t seq_len);

  /// Accumulates (+=) `loss_scale ×` the gradient of the last forward's mean
  /// loss into grads (layout().size() elements). params must hold the values
  /// the forward saw. loss_scale = 1/m averages m accumulated micro-batches.
  void backward(const T* params, T* grads, T loss_scale = T(1));
  /// backward() that reports gradient ranges the moment they are final
  /// (units.h, GradReady): "head" whole, then each tensor of blocks L−1 … 0
  /// as the block's backward finishes it, then "embed" whole and last — with
  /// a tied head the embedding's wte gradient gets the head's share first and
  /// its own last, so it is the last one ready. DDP starts a bucket's
  /// allreduce from here. on_grad_ready may be empty.
  void backward(const T* params, T* grads, T loss_scale, const GradReady& on_grad_ready);

  // ---- stages: a run of units on an input activation (pipeline, ZeRO-3) ----

  /// The units of this model: "embed", "h.0" … "h.L−1", "head" (units.h).
  const std::vector<Unit>& units() const { return units_; }
  /// Runs units `range` (begin < end ≤ units().size()) with parameters from
  /// `access`. A range starting at 0 embeds `tokens` [batch, seq_len]; a later
  /// one starts from `x_in` [batch·seq_len, dim], the previous stage's
  /// output(). A range ending with the head returns the mean loss against
  /// `targets` (nullptr: inference, returns 0); otherwise returns 0 and
  /// output() holds the residual stream after its last block. Keeps what
  /// backward needs (activations()).
  T forward(UnitAccess<T>& access, UnitRange range, const std::int32_t* tokens, const T* x_in,
            const std::int32_t* targets, std::int64_t batch, std::int64_t seq_len);
  /// Backward of the last forward over its range: from the loss when the range
  /// ends with the head (dx_out ignored), else from `dx_out`, the gradient of
  /// output() that the next stage sent back. Accumulates into access.grads,
  /// reports ranges to on_grad_ready as the whole-model backward does, and
  /// leaves the gradient of x_in in input_grad() when the range does not start
  /// at the embedding.
  void backward(UnitAccess<T>& access, const T* dx_out, T loss_scale,
                const GradReady& on_grad_ready);
  /// The residual stream after the last forward's last block, [batch·seq, dim]
  /// (what a stage sends to the next one).
  std::span<const T> output() const;
  /// The gradient of the last forward's x_in after backward, [batch·seq, dim]
  /// (what a stage sends to the previous one).
  std::span<const T> input_grad() const;
  /// Bytes of activations a forward over `range` keeps for its backward, for
  /// batch×seq_len tokens: exactly what activations() holds after it (T-sized
  /// values and 4-byte token ids). The training layer charges this to the
  /// memory ledger while a forward's activations are alive.
  std::int64_t activation_bytes(UnitRange range, std::int64_t batch, std::int64_t seq_len) const;
  /// Frees the activations (activation checkpointing keeps only a stage's
  /// input and runs forward again before backward).
  void release_activations();

  /// What the last forward kept (overwritten by the next forward).
  const GptActivations<T>& activations() const { return acts_; }
  /// The last forward's logits, [batch·seq_len, vocab].
  const kernels::Vector<T>& logits() const { return acts_.head.logits; }

 private:
  ModelConfig config_;
  ModelShard shard_;
  ParamLayout layout_;
  Seams<T>* seams_ = nullptr;
  // The identity seams used when none are set: the model's own, so that its
  // core can take the model's Place (identity_seams() is shared by threads).
  Seams<T> own_seams_;
  kernels::Place place_ = kernels::Place::host();
  std::vector<Unit> units_;
  LayerTimes* times_ = nullptr;
  GptActivations<T> acts_;
  TokenRuns positions_;  // of the last forward's tokens
  bool has_forward_ = false;
  kernels::Vector<T> dx_;       // gradient of the residual stream, reused block to block
  kernels::Vector<T> scratch_;  // backward scratch, sized for the largest layer
};

}  // namespace dtw::model
