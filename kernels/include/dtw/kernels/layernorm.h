#pragma once
/// @file
/// Layer normalisation over the last dimension. Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// For each of `rows` rows of x (length cols): mean μ, reciprocal standard
/// deviation r = 1/√(var + eps) (biased variance), and
/// `y = (x − μ)·r·gamma + beta`. mean and rstd (rows elements each) are saved
/// for the backward pass.
template <class T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                       std::int64_t rows, std::int64_t cols, T eps = T(1e-5));
/// layernorm_forward as plain loops: the reference the kernel is tested against.
template <class T>
void layernorm_forward_reference(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                                 std::int64_t rows, std::int64_t cols, T eps = T(1e-5));

/// Overwrites dx; accumulates dgamma and dbeta (cols elements each).
template <class T>
void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                        const T* rstd, const T* gamma, std::int64_t rows, std::int64_t cols);
/// layernorm_backward as plain loops: the reference the kernel is tested against.
template <class T>
void layernorm_backward_reference(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                                  const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                                  std::int64_t cols);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_layernorm.h) on the Place's device and stream ----

/// layernorm_forward on `at`: the host kernel, or device_layernorm_forward on at's stream.
template <class T>
void layernorm_forward(const Place& at, T* y, T* mean, T* rstd, const T* x, const T* gamma,
                       const T* beta, std::int64_t rows, std::int64_t cols, T eps = T(1e-5));

/// layernorm_backward on `at`: the host kernel, or device_layernorm_backward on at's stream.
template <class T>
void layernorm_backward(const Place& at, T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                        const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                        std::int64_t cols);

}  // namespace dtw::kernels
