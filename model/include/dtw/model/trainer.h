#pragma once
/// @file
/// The single-device reference trainer: the run every parallel training
/// chapter must reproduce.
///
/// One step: zero the gradients, forward and backward over the whole global
/// batch, clip the gradient's global norm, one optimiser step per ParamView
/// (weight decay only where ParamView::decay), record the loss. The
/// parameters start from init_params(config, layout, seed) and step s trains
/// on token_batch(task, seed, s, batch, seq_len, vocab) (GPT) or
/// class_batch(seed, s, batch, features, classes) (MLP), so a distributed run
/// with the same options sees the same numbers. Deterministic: the same
/// options give bitwise the same parameters.

#include <cstdint>
#include <functional>
#include <vector>

#include "dtw/kernels/optim.h"
#include "dtw/model/config.h"
#include "dtw/model/data.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"
#include "dtw/types.h"

namespace dtw::model {

/// The update rule.
enum class Optimizer { kAdamW, kSgd };

/// What on_step reports after each step.
struct StepInfo {
  std::int64_t step;    ///< 0-based: the data step trained on (losses[step])
  double loss;          ///< mean loss of the step's batch, before the update
  double grad_norm;     ///< global gradient norm before clipping
  std::int64_t tokens;  ///< tokens (GPT: batch·seq_len) or rows (MLP) in the step
  double seconds;       ///< wall time of the step
};

/// How to train.
struct TrainOptions {
  TokenTask task = TokenTask::kSynthetic;  ///< GPT only; the MLP uses class_batch
  std::int64_t batch = 8;                  ///< global batch: sequences (GPT) or rows (MLP)
  std::int64_t seq_len = 0;                ///< 0: the config's context
  std::uint64_t seed = 1234;               ///< init and data
  Optimizer optimizer = Optimizer::kAdamW;  ///< which of adamw / sgd below applies
  /// Decay only where ParamView::decay.
  kernels::AdamWConfig adamw{/*lr*/ 3e-3, 0.9, 0.95, 1e-8, /*weight_decay*/ 0.1};
  /// Weight decay (L2) likewise only where ParamView::decay.
  kernels::SgdConfig sgd{/*lr*/ 0.1, /*momentum*/ 0.9, 0.0};
  double clip_norm = 1.0;                        ///< 0: no clipping
  /// Linear learning-rate warm-up: step s (1-based) uses lr·min(1, s/warmup_steps);
  /// 0: the full rate from the first step.
  std::int64_t warmup_steps = 0;
  LayerTimes* times = nullptr;                   ///< per-layer-type time, if given
  std::function<void(const StepInfo&)> on_step;  ///< after every step
};

/// The outcome of a run.
template <class T>
struct TrainResult {
  std::vector<double> losses;  ///< one per step
  std::vector<T> params;       ///< final parameters, laid out as `layout`
  ParamLayout layout;          ///< param_layout(config): names and offsets of `params`
};

/// Trains `config` for `steps` steps on one device. Bad options (batch < 1,
/// seq_len outside [0, context], steps < 0, negative clip_norm) raise
/// InvalidArgument naming the values. T is float or double.
///
/// Defined in the training layer (library dtw::train, train/src/reference.cpp),
/// where the reference is a `dtw::train::Replica` over the whole model with
/// one data shard, so it and every parallel strategy share the step by
/// construction: link dtw::train to call it. The canonical run's options are
/// `dtw::train::standard_run(model).options()`; the defaults of TrainOptions
/// are the bare trainer's (synthetic data, no warm-up) that the model's own
/// unit tests use.
template <TrainElement T = float>
TrainResult<T> train_reference(const ModelConfig& config, std::int64_t steps,
                               const TrainOptions& options = {});

/// The factor on the learning rate at optimiser step `step` (1-based): the
/// linear warm-up of TrainOptions::warmup_steps, 1 after it.
double learning_rate_scale(const TrainOptions& options, std::int64_t step);

/// One optimiser step over elements [begin, end) of the flat buffer, view by
/// view (weight decay only where ParamView::decay), exactly as
/// train_reference applies it; `step` is 1-based (AdamW's bias correction).
/// params, grads, m and v point at element `begin` (a ZeRO shard passes its
/// own range and buffers; the whole model passes 0, layout.size()). m and v
/// are AdamW's moments; SGD uses m as its velocity and ignores v (may be
/// nullptr). State starts at zero.
/// The kernels run on `at` (the host by default), where every buffer must live.
template <TrainElement T>
void optimizer_step(const ParamLayout& layout, const TrainOptions& options, std::int64_t step,
                    std::int64_t begin, std::int64_t end, T* params, const T* grads, T* m, T* v,
                    const kernels::Place& at = kernels::Place::host());

}  // namespace dtw::model
