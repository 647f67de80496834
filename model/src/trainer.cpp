// The optimiser rule of the reference trainer: warm-up and a step over any
// range of the flat buffer. train_reference itself is in train/src/reference.cpp.
#include "dtw/model/trainer.h"

#include <algorithm>

#include "dtw/errors.h"

namespace dtw::model {

double learning_rate_scale(const TrainOptions& options, std::int64_t step) {
  // Linear warm-up: Adam's second moment starts at zero and is estimated from
  // few gradients in the first steps, so full-size steps then are noisy and
  // can throw the loss up; growing the rate over warmup_steps avoids that.
  if (options.warmup_steps <= 0 || step >= options.warmup_steps) return 1.0;
  return static_cast<double>(step) / static_cast<double>(options.warmup_steps);
}

template <TrainElement T>
void optimizer_step(const ParamLayout& layout, const TrainOptions& options, std::int64_t step,
                    std::int64_t begin, std::int64_t end, T* params, const T* grads, T* m, T* v,
                    const kernels::Place& at) {
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
    const std::int64_t off = lo - begin, n = hi - lo;
    if (options.optimizer == Optimizer::kAdamW) {
      kernels::AdamWConfig config = options.adamw;
      config.lr *= lr_scale;
      if (!view.decay) config.weight_decay = 0;
      kernels::adamw_step(at, params + off, grads + off, m + off, v + off, n, step, config);
    } else {
      kernels::SgdConfig config = options.sgd;
      config.lr *= lr_scale;
      if (!view.decay) config.weight_decay = 0;
      kernels::sgd_step(at, params + off, static_cast<const T*>(grads + off), m + off, n, config);
    }
  }
}

#define DTW_INSTANTIATE(T)                                                               \
  template void optimizer_step<T>(const ParamLayout&, const TrainOptions&, std::int64_t, \
                                  std::int64_t, std::int64_t, T*, const T*, T*, T*,      \
                                  const kernels::Place&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
