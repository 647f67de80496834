// Row-wise softmax on a CUDA device, matching softmax.cpp: the row maximum
// subtracted first (every exponent ≤ 0, the largest term exactly 1, so the sum
// is ≥ 1), exponentials in T, sums in double in a fixed order (row_reduce.cuh).
#include <cmath>
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_softmax.h"
#include "row_reduce.cuh"

namespace dtw::kernels {
namespace {

using cuda_detail::Add;
using cuda_detail::block_reduce;
using cuda_detail::exp_of;
using cuda_detail::grid_for;
using cuda_detail::kThreads;
using cuda_detail::Max;

void check_sizes(const char* kernel, std::int64_t rows, std::int64_t cols) {
  DTW_CHECK_ARG(rows >= 0 && cols >= 0, kernel << ": sizes must not be negative (rows " << rows
                                               << ", cols " << cols << ")");
}

// One block per row (grid-stride over rows, uniform per block, so every
// thread reaches block_reduce's barriers); thread t takes columns t,
// t + kThreads, ... (coalesced). Three passes: the maximum, Σ exp(x − max),
// then y = exp(x − max)·(1/Σ), the exponential recomputed rather than stored
// (one read of x instead of a write and a read of y). Both reductions finish
// before any y is written and each thread writes only what it read, so y may
// alias x. Per element: 3 reads, 1 write, 2 exps and ~4 flops.
template <class T>
__global__ void softmax_forward_kernel(T* y, const T* x, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    // Every thread starts from x[0] (cols ≥ 1 here): a thread with no columns
    // then changes no maximum. T → double is exact, so is the way back.
    double part = static_cast<double>(xr[0]);
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      part = Max{}(part, static_cast<double>(xr[c]));
    const T max = static_cast<T>(block_reduce(part, Max{}));
    part = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      part += static_cast<double>(exp_of(xr[c] - max));
    const T inv = static_cast<T>(1.0 / block_reduce(part, Add{}));
    T* yr = y + r * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) yr[c] = exp_of(xr[c] - max) * inv;
  }
}

// dx = y ∘ (dy − Σ y·dy), one block per row as above. The dot product is
// complete before any dx is written, and each thread writes only the elements
// it read, so dx may alias dy. Per element: 2 reads each of y and dy, 1 write,
// 4 flops.
template <class T>
__global__ void softmax_backward_kernel(T* dx, const T* __restrict__ y, const T* dy,
                                        std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    double part = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      part += static_cast<double>(yr[c]) * static_cast<double>(dyr[c]);
    const T d = static_cast<T>(block_reduce(part, Add{}));
    T* dxr = dx + r * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) dxr[c] = yr[c] * (dyr[c] - d);
  }
}

}  // namespace

template <class T>
void device_softmax_forward(T* y, const T* x, std::int64_t rows, std::int64_t cols, void* stream) {
  check_sizes("device_softmax_forward", rows, cols);
  if (rows == 0 || cols == 0) return;
  softmax_forward_kernel<T>
      <<<grid_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, x, rows, cols);
  DTW_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void device_softmax_backward(T* dx, const T* y, const T* dy, std::int64_t rows, std::int64_t cols,
                             void* stream) {
  check_sizes("device_softmax_backward", rows, cols);
  if (rows == 0 || cols == 0) return;
  softmax_backward_kernel<T>
      <<<grid_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dx, y, dy, rows, cols);
  DTW_CUDA_CHECK(cudaGetLastError());
}

#define DTW_INSTANTIATE(T)                                                                   \
  template void device_softmax_forward<T>(T*, const T*, std::int64_t, std::int64_t, void*); \
  template void device_softmax_backward<T>(T*, const T*, const T*, std::int64_t, std::int64_t, \
                                           void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
