// The single-device reference trainer every parallel chapter reproduces.
#include "dtw/model/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "dtw/errors.h"
#include "dtw/model/gpt.h"
#include "dtw/model/mlp.h"

namespace dtw::model {

double learning_rate_scale(const TrainOptions& options, std::int64_t step) {
  // Linear warm-up: Adam's second moment starts at zero and is estimated from
  // few gradients in the first steps, so full-size steps then are noisy and
  // can throw the loss up; growing the rate over warmup_steps avoids that.
  if (options.warmup_steps <= 0 || step >= options.warmup_steps) return 1.0;
  return static_cast<double>(step) / static_cast<double>(options.warmup_steps);
}

template <class T>
void optimizer_step(const ParamLayout& layout, const TrainOptions& options, std::int64_t step,
                    std::int64_t begin, std::int64_t end, T* params, const T* grads, T* m, T* v) {
  DTW_CHECK_ARG(0 <= begin && begin <= end && end <= layout.size(),
                "optimizer_step: range [" << begin << ", " << end << ") is outside [0, "
                                          << layout.size() << ")");
  DTW_CHECK_ARG(step >= 1, "optimizer_step: step " << step << " must be 1 or more");
  const double lr_scale = learning_rate_scale(options, step);
  // Step each view's part of [begin, end) on its own, because the views differ
  // in one hyper-parameter: whether weight decay applies.
  for (const ParamView& view : layout.views()) {
    const std::int64_t lo = std::max(begin, view.offset);
    const std::int64_t hi = std::min(end, view.offset + view.size);
    if (lo >= hi) continue;
    const std::int64_t at = lo - begin, n = hi - lo;
    if (options.optimizer == Optimizer::kAdamW) {
      kernels::AdamWConfig config = options.adamw;
      config.lr *= lr_scale;
      if (!view.decay) config.weight_decay = 0;
      kernels::adamw_step(params + at, grads + at, m + at, v + at, n, step, config);
    } else {
      kernels::SgdConfig config = options.sgd;
      config.lr *= lr_scale;
      if (!view.decay) config.weight_decay = 0;
      kernels::sgd_step(params + at, grads + at, m + at, n, config);
    }
  }
}

namespace {

// One model behind one interface, so the training loop below is written once.
template <class T>
class Model {
 public:
  Model(const ModelConfig& config, const TrainOptions& o) : config_(config), options_(o) {
    if (config.kind == ModelKind::kGpt) {
      seq_len_ = o.seq_len == 0 ? config.context : o.seq_len;
      DTW_CHECK_ARG(o.seq_len >= 0 && seq_len_ <= config.context,
                    "train_reference: seq_len " << o.seq_len << " is outside [0, context "
                                                << config.context << "] of model " << config.name);
      gpt_ = std::make_unique<Gpt<T>>(config);
      gpt_->set_times(o.times);
    } else {
      mlp_ = std::make_unique<Mlp<T>>(config);
      mlp_->set_times(o.times);
    }
  }

  // Forward and backward on step `step`'s batch; returns the loss.
  double forward_backward(std::int64_t step, const T* params, T* grads) {
    if (gpt_) {
      const TokenBatch b =
          token_batch(options_.task, options_.seed, step, options_.batch, seq_len_, config_.vocab);
      const T loss =
          gpt_->forward(params, b.tokens.data(), b.targets.data(), b.sequences, b.seq_len);
      gpt_->backward(params, grads);
      return static_cast<double>(loss);
    }
    const ClassBatch b =
        class_batch(options_.seed, step, options_.batch, config_.features, config_.classes);
    inputs_.assign(b.inputs.begin(), b.inputs.end());  // float → T
    const T loss = mlp_->forward(params, inputs_.data(), b.labels.data(), b.rows);
    mlp_->backward(params, grads);
    return static_cast<double>(loss);
  }

  std::int64_t tokens_per_step() const { return gpt_ ? options_.batch * seq_len_ : options_.batch; }

 private:
  const ModelConfig& config_;
  const TrainOptions& options_;
  std::int64_t seq_len_ = 0;
  std::unique_ptr<Gpt<T>> gpt_;
  std::unique_ptr<Mlp<T>> mlp_;
  std::vector<T> inputs_;
};

}  // namespace

template <class T>
TrainResult<T> train_reference(const ModelConfig& config, std::int64_t steps,
                               const TrainOptions& options) {
  DTW_CHECK_ARG(steps >= 0, "train_reference: steps " << steps << " must not be negative");
  DTW_CHECK_ARG(options.batch >= 1,
                "train_reference: batch " << options.batch << " must be at least 1");
  DTW_CHECK_ARG(options.warmup_steps >= 0, "train_reference: warmup_steps "
                                                << options.warmup_steps << " must not be negative");
  DTW_CHECK_ARG(options.clip_norm >= 0,
                "train_reference: clip_norm " << options.clip_norm << " must not be negative");
  Model<T> model(config, options);  // validates the config and seq_len

  TrainResult<T> result;
  result.layout = param_layout(config);
  const std::int64_t n = result.layout.size();
  const auto count = static_cast<std::size_t>(n);
  result.params.resize(count);
  init_params(config, result.layout, options.seed, result.params.data());
  T* params = result.params.data();
  std::vector<T> grads(count), m(count);
  std::vector<T> v(options.optimizer == Optimizer::kAdamW ? count : 0);

  for (std::int64_t step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    {
      // Backward passes accumulate, so every step starts from zero gradients.
      ScopedLayerTimer timer(options.times, "optimizer");
      std::fill(grads.begin(), grads.end(), T(0));
    }
    const double loss = model.forward_backward(step, params, grads.data());
    double norm = 0;
    {
      ScopedLayerTimer timer(options.times, "optimizer");
      norm = options.clip_norm > 0 ? kernels::clip_grad_norm(grads.data(), n, options.clip_norm)
                                   : std::sqrt(kernels::sum_of_squares(grads.data(), n));
      optimizer_step(result.layout, options, step + 1, 0, n, params, grads.data(), m.data(),
                     v.empty() ? nullptr : v.data());
    }
    result.losses.push_back(loss);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (options.on_step) options.on_step({step, loss, norm, model.tokens_per_step(), took.count()});
  }
  return result;
}

#define DTW_INSTANTIATE(T)                                                               \
  template void optimizer_step<T>(const ParamLayout&, const TrainOptions&, std::int64_t, \
                                  std::int64_t, std::int64_t, T*, const T*, T*, T*);     \
  template TrainResult<T> train_reference<T>(const ModelConfig&, std::int64_t, const TrainOptions&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
