#pragma once
/// @file
/// Optimiser steps and gradient clipping over flat parameter ranges.
///
/// Each kernel updates a contiguous range of n parameters in place, so a
/// caller can step the whole flat buffer at once, one named view at a time
/// (e.g. no weight decay on biases and norms), or only its own shard (ZeRO).
/// Hyper-parameters are double whatever T is. Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// AdamW (Loshchilov & Hutter): decoupled weight decay.
struct AdamWConfig {
  double lr = 1e-3;           ///< learning rate
  double beta1 = 0.9;         ///< decay of the first moment (mean of g)
  double beta2 = 0.999;       ///< decay of the second moment (mean of g²)
  double eps = 1e-8;          ///< added to √v so tiny second moments do not blow up the step
  double weight_decay = 0.0;  ///< decoupled: p −= lr·weight_decay·p, apart from the gradient
};

/// One AdamW step at `step` (1-based; the bias corrections use it):
/// m = β1 m + (1−β1) g; v = β2 v + (1−β2) g²;
/// p −= lr·(m/(1−β1^t) / (√(v/(1−β2^t)) + eps) + weight_decay·p).
/// m and v are the optimiser state (start at 0), n elements each. step < 1
/// raises InvalidArgument.
template <class T>
void adamw_step(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                const AdamWConfig& config);
/// adamw_step as plain loops: the reference the kernel is tested against.
template <class T>
void adamw_step_reference(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                          const AdamWConfig& config);

/// SGD with (heavy-ball) momentum and L2 weight decay, as torch.optim.SGD.
struct SgdConfig {
  double lr = 1e-2;           ///< learning rate
  double momentum = 0.0;      ///< 0: plain SGD
  double weight_decay = 0.0;  ///< L2: added to the gradient (g + weight_decay·p)
};
/// One SGD step: g' = g + weight_decay·p; velocity = momentum·velocity + g';
/// p −= lr·velocity. With momentum 0, velocity may be nullptr.
template <class T>
void sgd_step(T* params, const T* grads, T* velocity, std::int64_t n, const SgdConfig& config);
/// sgd_step as plain loops: the reference the kernel is tested against.
template <class T>
void sgd_step_reference(T* params, const T* grads, T* velocity, std::int64_t n,
                        const SgdConfig& config);

/// Σ x[i]², accumulated in double. A distributed caller sums this over its
/// shards (allreduce) and takes the square root to get the global norm.
template <class T>
double sum_of_squares(const T* x, std::int64_t n);

/// `x[i] *= factor`.
template <class T>
void scale(T* x, std::int64_t n, T factor);

/// Clips by global norm: norm = √Σg²; if norm > max_norm, scales g by
/// max_norm/(norm + 1e-6). Returns the norm before clipping. max_norm ≤ 0
/// raises InvalidArgument.
template <class T>
double clip_grad_norm(T* grads, std::int64_t n, double max_norm);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_optim.h) on the Place's device and stream ----

/// adamw_step on `at`: the host kernel, or device_adamw_step on at's stream.
template <class T>
void adamw_step(const Place& at, T* params, const T* grads, T* m, T* v, std::int64_t n,
                std::int64_t step, const AdamWConfig& config);

/// sgd_step on `at`: the host kernel, or device_sgd_step on at's stream.
template <class T>
void sgd_step(const Place& at, T* params, const T* grads, T* velocity, std::int64_t n,
              const SgdConfig& config);

/// sum_of_squares on `at`: the host kernel, or device_sum_of_squares on at's stream.
template <class T>
double sum_of_squares(const Place& at, const T* x, std::int64_t n);

/// scale on `at`: the host kernel, or device_scale on at's stream.
template <class T>
void scale(const Place& at, T* x, std::int64_t n, T factor);

/// clip_grad_norm on `at`: the host kernel, or device_clip_grad_norm on at's stream.
template <class T>
double clip_grad_norm(const Place& at, T* grads, std::int64_t n, double max_norm);

}  // namespace dtw::kernels
