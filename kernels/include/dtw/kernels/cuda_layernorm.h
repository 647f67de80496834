#pragma once
/// @file
/// Layer normalisation on a CUDA device (built only where CUDA was found:
/// DTW_HAVE_CUDA in dtw/config.h): layernorm.h's functions with the prefix
/// `device_`, the same arguments, then a stream. The stream is a `void*` so
/// that this header needs no CUDA header; pass a `cudaStream_t`, or nullptr
/// for the default stream. All pointers are device memory. Each call enqueues
/// its kernels on the stream and returns without waiting. Arguments are
/// checked before any CUDA call (dtw::InvalidArgument naming the values); a
/// failed launch throws dtw::CudaError. Results are bitwise the same on every
/// run: every sum has a fixed order and no kernel uses atomics.

#include <cstdint>

namespace dtw::kernels {

/// layernorm_forward on the device: for each of `rows` rows of x (length
/// cols), mean μ and rstd r = 1/√(var + eps) (biased variance, both sums in
/// double), and `y = (x − μ)·r·gamma + beta` computed with the saved (rounded)
/// μ and r. A row of no columns gets mean 0 and rstd 1/√eps, as on the host.
/// Sizes must not be negative.
template <class T>
void device_layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                              std::int64_t rows, std::int64_t cols, T eps = T(1e-5),
                              void* stream = nullptr);

/// layernorm_backward on the device: overwrites dx (which may alias dy) and,
/// like the host, ACCUMULATES into dgamma and dbeta (cols elements each):
/// `dgamma[c] += Σ_r dy·x̂`, `dbeta[c] += Σ_r dy`, the sums in double in a
/// fixed order. Nothing is launched when rows or cols is 0.
template <class T>
void device_layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                               const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                               std::int64_t cols, void* stream = nullptr);

}  // namespace dtw::kernels
