// Optimiser steps as Kokkos kernels, next to the plain loops they must match.
//
// Every update is element-wise: element i reads and writes only index i of
// params, grads and the state, so a RangePolicy over i needs no atomics and
// the result does not depend on how Kokkos splits the range. Arithmetic is in
// double whatever T is, with one rounding to T per stored value, so a float
// step loses nothing to intermediate rounding.
#include "dtw/kernels/optim.h"

#include <cmath>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

// The checks torch.optim makes, plus ours on sizes and pointers: a bad
// hyper-parameter should fail at the first step, not show up as NaN later.
void check_adamw(const void* params, const void* grads, const void* m, const void* v,
                 std::int64_t n, std::int64_t step, const AdamWConfig& c) {
  DTW_CHECK_ARG(n >= 0, "adamw_step: n " << n << " is negative");
  DTW_CHECK_ARG(step >= 1, "adamw_step: step " << step << " must be >= 1 (steps count from 1)");
  DTW_CHECK_ARG(c.lr >= 0, "adamw_step: lr " << c.lr << " is negative");
  DTW_CHECK_ARG(c.beta1 >= 0 && c.beta1 < 1,
                "adamw_step: beta1 " << c.beta1 << " is outside [0, 1)");
  DTW_CHECK_ARG(c.beta2 >= 0 && c.beta2 < 1,
                "adamw_step: beta2 " << c.beta2 << " is outside [0, 1)");
  DTW_CHECK_ARG(c.eps >= 0, "adamw_step: eps " << c.eps << " is negative");
  DTW_CHECK_ARG(c.weight_decay >= 0,
                "adamw_step: weight_decay " << c.weight_decay << " is negative");
  DTW_CHECK_ARG(n == 0 || (params && grads && m && v),
                "adamw_step: a null pointer among params, grads, m, v for n " << n);
}

void check_sgd(const void* params, const void* grads, const void* velocity, std::int64_t n,
               const SgdConfig& c) {
  DTW_CHECK_ARG(n >= 0, "sgd_step: n " << n << " is negative");
  DTW_CHECK_ARG(c.lr >= 0, "sgd_step: lr " << c.lr << " is negative");
  DTW_CHECK_ARG(c.momentum >= 0, "sgd_step: momentum " << c.momentum << " is negative");
  DTW_CHECK_ARG(c.weight_decay >= 0, "sgd_step: weight_decay " << c.weight_decay << " is negative");
  DTW_CHECK_ARG(n == 0 || (params && grads),
                "sgd_step: a null pointer among params, grads for n " << n);
  DTW_CHECK_ARG(n == 0 || c.momentum == 0 || velocity,
                "sgd_step: momentum " << c.momentum << " needs a velocity buffer, got nullptr");
}

// Bias corrections are per step, not per element: computed once on the host.
template <class T>
struct AdamWFunctor {
  T* params;
  const T* grads;
  T* m;
  T* v;
  AdamWConfig c;
  double correction1, correction2;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const double g = static_cast<double>(grads[i]);
    const double p = static_cast<double>(params[i]);
    const double mi = c.beta1 * static_cast<double>(m[i]) + (1.0 - c.beta1) * g;
    const double vi = c.beta2 * static_cast<double>(v[i]) + (1.0 - c.beta2) * g * g;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    // Decoupled decay: weight_decay·p is added to the step *after* the
    // moment normalisation, so it is not divided by √v̂ (L2 inside Adam would be).
    const double update = (mi / correction1) / (std::sqrt(vi / correction2) + c.eps);
    params[i] = static_cast<T>(p - c.lr * (update + c.weight_decay * p));
  }
};

template <class T>
struct SgdFunctor {
  T* params;
  const T* grads;
  T* velocity;  // unused when momentum is 0
  double lr, momentum, weight_decay;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const double p = static_cast<double>(params[i]);
    // L2 decay: folded into the gradient, so with momentum it also builds up in the velocity.
    double d = static_cast<double>(grads[i]) + weight_decay * p;
    if (momentum != 0) {
      d = momentum * static_cast<double>(velocity[i]) + d;
      velocity[i] = static_cast<T>(d);
    }
    params[i] = static_cast<T>(p - lr * d);
  }
};

template <class T>
struct ScaleFunctor {
  T* x;
  T factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { x[i] *= factor; }
};

}  // namespace

template <class T>
void adamw_step(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                const AdamWConfig& config) {
  check_adamw(params, grads, m, v, n, step, config);
  if (n == 0) return;
  ensure_kokkos_initialized();
  const double t = static_cast<double>(step);
  const double correction1 = 1.0 - std::pow(config.beta1, t);
  const double correction2 = 1.0 - std::pow(config.beta2, t);
  const AdamWFunctor<T> f{params, grads, m, v, config, correction1, correction2};
  Kokkos::parallel_for("dtw::adamw_step", host_range(0, n), f);
}

template <class T>
void adamw_step_reference(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                          const AdamWConfig& config) {
  check_adamw(params, grads, m, v, n, step, config);
  const double b1 = config.beta1, b2 = config.beta2;
  const double c1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double c2 = 1.0 - std::pow(b2, static_cast<double>(step));
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = grads[i], p = params[i];
    const double m_new = b1 * static_cast<double>(m[i]) + (1.0 - b1) * g;
    const double v_new = b2 * static_cast<double>(v[i]) + (1.0 - b2) * g * g;
    const double m_hat = m_new / c1, v_hat = v_new / c2;
    m[i] = static_cast<T>(m_new);
    v[i] = static_cast<T>(v_new);
    params[i] = static_cast<T>(
        p - config.lr * (m_hat / (std::sqrt(v_hat) + config.eps) + config.weight_decay * p));
  }
}

template <class T>
void sgd_step(T* params, const T* grads, T* velocity, std::int64_t n, const SgdConfig& config) {
  check_sgd(params, grads, velocity, n, config);
  if (n == 0) return;
  ensure_kokkos_initialized();
  const SgdFunctor<T> f{params, grads, velocity, config.lr, config.momentum, config.weight_decay};
  Kokkos::parallel_for("dtw::sgd_step", host_range(0, n), f);
}

template <class T>
void sgd_step_reference(T* params, const T* grads, T* velocity, std::int64_t n,
                        const SgdConfig& config) {
  check_sgd(params, grads, velocity, n, config);
  for (std::int64_t i = 0; i < n; ++i) {
    const double p = params[i];
    const double g = static_cast<double>(grads[i]) + config.weight_decay * p;
    double step = g;
    if (config.momentum != 0) {
      step = config.momentum * static_cast<double>(velocity[i]) + g;
      velocity[i] = static_cast<T>(step);
    }
    params[i] = static_cast<T>(p - config.lr * step);
  }
}

// A plain loop, not a Kokkos reduction: Kokkos 3.4's Serial backend shares
// its reduction scratch between threads, and rank threads call this at once.
template <class T>
double sum_of_squares(const T* x, std::int64_t n) {
  DTW_CHECK_ARG(n >= 0, "sum_of_squares: n " << n << " is negative");
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double xi = static_cast<double>(x[i]);
    sum += xi * xi;
  }
  return sum;
}

template <class T>
void scale(T* x, std::int64_t n, T factor) {
  DTW_CHECK_ARG(n >= 0, "scale: n " << n << " is negative");
  if (n == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::scale", host_range(0, n), ScaleFunctor<T>{x, factor});
}

template <class T>
double clip_grad_norm(T* grads, std::int64_t n, double max_norm) {
  DTW_CHECK_ARG(max_norm > 0, "clip_grad_norm: max_norm " << max_norm << " must be > 0");
  DTW_CHECK_ARG(n >= 0, "clip_grad_norm: n " << n << " is negative");
  const double norm = std::sqrt(sum_of_squares(grads, n));
  // The 1e-6 (as in torch) keeps the factor finite for a tiny max_norm and
  // lands the clipped norm just under max_norm. A NaN norm compares false and
  // leaves the gradients as they are; the caller sees it in the return value.
  if (norm > max_norm) scale(grads, n, static_cast<T>(max_norm / (norm + 1e-6)));
  return norm;
}

#define DTW_INSTANTIATE(T)                                                                \
  template void adamw_step<T>(T*, const T*, T*, T*, std::int64_t, std::int64_t,           \
                              const AdamWConfig&);                                        \
  template void adamw_step_reference<T>(T*, const T*, T*, T*, std::int64_t, std::int64_t, \
                                        const AdamWConfig&);                              \
  template void sgd_step<T>(T*, const T*, T*, std::int64_t, const SgdConfig&);            \
  template void sgd_step_reference<T>(T*, const T*, T*, std::int64_t, const SgdConfig&);  \
  template double sum_of_squares<T>(const T*, std::int64_t);                              \
  template void scale<T>(T*, std::int64_t, T);                                            \
  template double clip_grad_norm<T>(T*, std::int64_t, double);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
