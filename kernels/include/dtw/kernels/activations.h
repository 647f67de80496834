#pragma once
/// @file
/// Element-wise and broadcast layers: bias add and GELU.
///
/// Conventions shared by every training kernel in dtw/kernels: tensors are
/// row-major and contiguous; forward kernels overwrite their outputs; backward
/// kernels *overwrite* gradients with respect to inputs (dx) and *accumulate*
/// (+=) gradients with respect to parameters (dbias, dweight), so gradient
/// accumulation over micro-batches and tied weights need no extra buffers.
/// Every kernel is templated on float and double (double for gradient checks),
/// has a `*_reference` twin written as plain loops, and is safe to call from
/// many rank threads at once. Sizes are checked: negative ones raise
/// InvalidArgument naming the value.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// `y[r][c] += bias[c]` for a rows×cols matrix y.
template <class T>
void bias_add(T* y, const T* bias, std::int64_t rows, std::int64_t cols);
/// bias_add as plain loops: the reference the kernel is tested against.
template <class T>
void bias_add_reference(T* y, const T* bias, std::int64_t rows, std::int64_t cols);

/// `dbias[c] += sum over r of dy[r][c]`.
template <class T>
void bias_backward(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols);
/// bias_backward as plain loops: the reference the kernel is tested against.
template <class T>
void bias_backward_reference(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols);

/// GELU with the tanh approximation (as in GPT-2):
/// `y = x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³)))`, for n elements. y may alias x.
template <class T>
void gelu_forward(T* y, const T* x, std::int64_t n);
/// gelu_forward as plain loops: the reference the kernel is tested against.
template <class T>
void gelu_forward_reference(T* y, const T* x, std::int64_t n);

/// `dx = dy · gelu'(x)` for n elements (overwrites dx; dx may alias dy).
template <class T>
void gelu_backward(T* dx, const T* x, const T* dy, std::int64_t n);
/// gelu_backward as plain loops: the reference the kernel is tested against.
template <class T>
void gelu_backward_reference(T* dx, const T* x, const T* dy, std::int64_t n);

/// `y[i] += x[i]` for n elements: the residual connection and gradient sums.
template <class T>
void add_into(T* y, const T* x, std::int64_t n);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_activations.h) on the Place's device and stream ----

/// bias_add on `at`: the host kernel, or device_bias_add on at's stream.
template <class T>
void bias_add(const Place& at, T* y, const T* bias, std::int64_t rows, std::int64_t cols);

/// bias_backward on `at`: the host kernel, or device_bias_backward on at's stream.
template <class T>
void bias_backward(const Place& at, T* dbias, const T* dy, std::int64_t rows, std::int64_t cols);

/// gelu_forward on `at`: the host kernel, or device_gelu_forward on at's stream.
template <class T>
void gelu_forward(const Place& at, T* y, const T* x, std::int64_t n);

/// gelu_backward on `at`: the host kernel, or device_gelu_backward on at's stream.
template <class T>
void gelu_backward(const Place& at, T* dx, const T* x, const T* dy, std::int64_t n);

/// add_into on `at`: the host kernel, or device_add_into on at's stream.
template <class T>
void add_into(const Place& at, T* y, const T* x, std::int64_t n);

}  // namespace dtw::kernels
