#pragma once
/// @file
/// Row-wise softmax, computed stably (the row maximum is subtracted first).
/// Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// `y[r][c] = exp(x[r][c] − max_r) / Σ_c' exp(x[r][c'] − max_r)`. y may alias x.
template <class T>
void softmax_forward(T* y, const T* x, std::int64_t rows, std::int64_t cols);
/// softmax_forward as plain loops: the reference the kernel is tested against.
template <class T>
void softmax_forward_reference(T* y, const T* x, std::int64_t rows, std::int64_t cols);

/// `dx = y ∘ (dy − Σ_c y·dy)` per row, from the forward output y. Overwrites dx
/// (which may alias dy).
template <class T>
void softmax_backward(T* dx, const T* y, const T* dy, std::int64_t rows, std::int64_t cols);
/// softmax_backward as plain loops: the reference the kernel is tested against.
template <class T>
void softmax_backward_reference(T* dx, const T* y, const T* dy, std::int64_t rows,
                                std::int64_t cols);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_softmax.h) on the Place's device and stream ----

/// softmax_forward on `at`: the host kernel, or device_softmax_forward on at's stream.
template <class T>
void softmax_forward(const Place& at, T* y, const T* x, std::int64_t rows, std::int64_t cols);

/// softmax_backward on `at`: the host kernel, or device_softmax_backward on at's stream.
template <class T>
void softmax_backward(const Place& at, T* dx, const T* y, const T* dy, std::int64_t rows,
                      std::int64_t cols);

}  // namespace dtw::kernels
