#pragma once
/// @file
/// Row-wise softmax on a CUDA device (built only where CUDA was found:
/// DTW_HAVE_CUDA in dtw/config.h): softmax.h's functions with the prefix
/// `device_`, the same arguments, then a stream. The stream is a `void*` so
/// that this header needs no CUDA header; pass a `cudaStream_t`, or nullptr
/// for the default stream. All pointers are device memory. Each call enqueues
/// one kernel on the stream and returns without waiting. Sizes are checked
/// before any CUDA call (dtw::InvalidArgument naming them); a failed launch
/// throws dtw::CudaError. Results are bitwise the same on every run.

#include <cstdint>

namespace dtw::kernels {

/// softmax_forward on the device: `y[r][c] = exp(x[r][c] − max_r) / Σ_c'
/// exp(x[r][c'] − max_r)`, the exponentials in T, their sum in double. y may
/// alias x. Nothing is launched when rows or cols is 0.
template <class T>
void device_softmax_forward(T* y, const T* x, std::int64_t rows, std::int64_t cols,
                            void* stream = nullptr);

/// softmax_backward on the device: `dx = y ∘ (dy − Σ_c y·dy)` per row (the sum
/// in double). Overwrites dx, which may alias dy.
template <class T>
void device_softmax_backward(T* dx, const T* y, const T* dy, std::int64_t rows, std::int64_t cols,
                             void* stream = nullptr);

}  // namespace dtw::kernels
