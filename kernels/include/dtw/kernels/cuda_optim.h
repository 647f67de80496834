#pragma once
/// @file
/// Optimiser steps and gradient clipping on a CUDA device (built only where
/// CUDA was found: DTW_HAVE_CUDA in dtw/config.h), mirroring optim.h: the same
/// arguments, then a `cudaStream_t` passed as `void*` (nullptr: the default
/// stream) so that this header needs no CUDA header. All pointers are device
/// memory. The steps do the host's floating-point operations in the host's
/// order (in double, with no fused multiply-add, one rounding to T per stored
/// value), so they agree with adamw_step_reference and sgd_step_reference to
/// the bit where the host compiler does not contract either. Calls enqueue on
/// the stream and return without waiting, except those returning a double
/// (device_sum_of_squares, device_clip_grad_norm), which wait on the stream.
/// The argument checks are the host's, made before any CUDA call.

#include <cstdint>

#include "dtw/kernels/optim.h"

namespace dtw::kernels {

/// adamw_step on the device: one AdamW step at `step` (1-based) over n
/// elements. The bias corrections 1−β^t are computed on the host with
/// std::pow, as adamw_step does. n 0 launches nothing.
template <class T>
void device_adamw_step(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                       const AdamWConfig& config, void* stream = nullptr);

/// sgd_step on the device. With momentum 0, velocity may be nullptr.
template <class T>
void device_sgd_step(T* params, const T* grads, T* velocity, std::int64_t n,
                     const SgdConfig& config, void* stream = nullptr);

/// Σ x[i]² in double, with a fixed two-pass tree reduction (the same bits on
/// every run and every GPU for the same n). Waits on `stream` and returns the
/// sum; it differs from the host's sequential sum by at most about n·ε·Σx².
template <class T>
double device_sum_of_squares(const T* x, std::int64_t n, void* stream = nullptr);

/// `x[i] *= factor` on the device (one rounding, as on the host).
template <class T>
void device_scale(T* x, std::int64_t n, T factor, void* stream = nullptr);

/// clip_grad_norm on the device: norm = √device_sum_of_squares; if norm >
/// max_norm, scales by max_norm/(norm + 1e-6) on the device (host rule).
/// Waits on `stream` for the norm; the scaling, if any, is left enqueued.
/// Returns the norm before clipping.
template <class T>
double device_clip_grad_norm(T* grads, std::int64_t n, double max_norm, void* stream = nullptr);

}  // namespace dtw::kernels
