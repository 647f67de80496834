#pragma once
/// @file
/// The GPT: embedding → L transformer blocks → final norm → head → loss, with
/// an explicit backward pass, over a flat parameter buffer (params.h).
///
/// A Gpt<T> holds the activations of one forward pass (one micro-batch); the
/// parameters and gradients live outside it, so many Gpt objects (rank
/// threads, micro-batches in flight) can share one parameter buffer. The
/// layers themselves are in gpt_layers.h for chapters that compose them
/// differently.

#include <cstdint>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/model/gpt_layers.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"

namespace dtw::model {

/// Everything one forward pass keeps for its backward pass.
template <class T>
struct GptActivations {
  std::int64_t batch = 0;             ///< sequences in the micro-batch
  std::int64_t seq = 0;               ///< tokens per sequence (seq_len)
  std::vector<std::int32_t> tokens;   ///< [batch, seq]
  std::vector<std::int32_t> targets;  ///< [batch, seq] (empty: inference)
  /// The residual stream: x[0] is the embedding, x[l + 1] block l's output,
  /// x[layers] what the head reads; each [batch·seq, dim].
  std::vector<std::vector<T>> x;
  std::vector<BlockCache<T>> blocks;  ///< one per block
  HeadCache<T> head;                  ///< final norm, logits and loss
};

/// A decoder-only transformer of a kGpt configuration.
template <class T>
class Gpt {
 public:
  /// Validates the configuration (InvalidArgument if bad or not a GPT).
  explicit Gpt(const ModelConfig& config);

  /// The configuration this model was built from.
  const ModelConfig& config() const { return config_; }
  /// Where each tensor lives in the flat params/grads buffers.
  const ParamLayout& layout() const { return layout_; }
  /// Records per-layer-kind time into `times` from now on (nullptr: stop).
  void set_times(LayerTimes* times) { times_ = times; }

  /// Runs the model on tokens [batch, seq_len] (row-major, ids in [0, vocab))
  /// and returns the mean next-token cross-entropy against targets [batch,
  /// seq_len]; keeps the activations for backward(). targets may be nullptr
  /// (inference: logits only, returns 0). 1 ≤ seq_len ≤ context and
  /// batch ≥ 1, otherwise InvalidArgument naming the values.
  T forward(const T* params, const std::int32_t* tokens, const std::int32_t* targets,
            std::int64_t batch, std::int64_t seq_len);

  /// Accumulates (+=) `loss_scale ×` the gradient of the last forward's mean
  /// loss into grads (layout().size() elements). params must hold the values
  /// the forward saw. loss_scale = 1/m averages m accumulated micro-batches.
  void backward(const T* params, T* grads, T loss_scale = T(1));

  /// What the last forward kept (overwritten by the next forward).
  const GptActivations<T>& activations() const { return acts_; }
  /// The last forward's logits, [batch·seq_len, vocab].
  const std::vector<T>& logits() const { return acts_.head.logits; }

 private:
  ModelConfig config_;
  ParamLayout layout_;
  LayerTimes* times_ = nullptr;
  GptActivations<T> acts_;
  bool has_forward_ = false;
  std::vector<T> dx_;       // gradient of the residual stream, reused block to block
  std::vector<T> scratch_;  // backward scratch, sized for the largest layer
};

}  // namespace dtw::model
