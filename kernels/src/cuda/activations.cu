// Bias add, GELU and add_into on a CUDA device. All memory-bound: each kernel
// is a grid-stride loop over its elements, sized to fill every SM a few times.
// GELU uses the host kernel's formula (activations.cpp): gelu(x) = x / (1 + e)
// with e = e^(−2u), u = √(2/π)(x + 0.044715x³), the exponent clamped as
// detail::exp_saturating does, so e and 1/(1 + e) stay finite and e·s never
// becomes ∞·0. expf/exp are CUDA's full-precision ones (≤ 2 ulp and ≤ 1 ulp);
// the build has no --use_fast_math.
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_activations.h"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
constexpr double kGeluCubic = 0.044715;

void check_size(const char* kernel, const char* name, std::int64_t value) {
  DTW_CHECK_ARG(value >= 0, kernel << ": " << name << " " << value << " is negative");
}

// Blocks for `work` independent items: one per kThreads items, capped at 8 per
// SM (the loops stride over the rest). work > 0, so at least one block.
int grid_for(std::int64_t work) {
  int device = 0, sms = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (work + kThreads - 1) / kThreads;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * 8;
  return static_cast<int>(wanted < cap ? wanted : cap);
}

__device__ __forceinline__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// e^z with z clamped like detail::exp_saturating: float |z| ≤ 87, double z ≤ 700.
// fmaxf/fminf return the other operand for a NaN z (as the host's bit clamp
// does, a NaN z gives a finite e; gelu is NaN anyway through x).
__device__ __forceinline__ float exp_saturating(float z) {
  return expf(fminf(fmaxf(z, -87.0f), 87.0f));
}
__device__ __forceinline__ double exp_saturating(double z) {
  return exp(fmin(z, 700.0));
}

template <class T>
__device__ __forceinline__ T gelu_value(T x) {
  const T u = T(kSqrt2OverPi) * x * (T(1) + T(kGeluCubic) * x * x);
  return x / (T(1) + exp_saturating(T(-2) * u));
}

// gelu'(x) = s + x·s(1 − s)·2u' with s = 1/(1 + e), 1 − s = e·s; e·s first,
// as on the host, because e alone may be ~1e38.
template <class T>
__device__ __forceinline__ T gelu_slope(T x) {
  const T x2 = x * x;
  const T u = T(kSqrt2OverPi) * x * (T(1) + T(kGeluCubic) * x2);
  const T e = exp_saturating(T(-2) * u);
  const T s = T(1) / (T(1) + e);
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x2);
  return s * (T(1) + T(2) * x * (e * s) * du);
}

// y[i] += bias[i mod cols] over the flattened rows×cols matrix, one thread per
// element (consecutive threads, consecutive addresses; bias stays in cache).
// Reads 2 and writes 1 element per element (≈ 3·sizeof(T) bytes), 1 flop.
template <class T>
__global__ void bias_add_kernel(T* __restrict__ y, const T* __restrict__ bias, std::int64_t count,
                                std::int64_t cols) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) y[i] += bias[i % cols];
}

// One thread per column: it walks the rows in order, summing dy[r][c] in
// double, then adds the sum to dbias[c] once -- the reference's order, so no
// atomics and no dependence on the launch shape. A warp reads 32 adjacent
// columns of one row: coalesced. rows·cols + 2·cols elements moved, rows·cols flops.
template <class T>
__global__ void bias_backward_kernel(T* __restrict__ dbias, const T* __restrict__ dy,
                                     std::int64_t rows, std::int64_t cols) {
  for (std::int64_t c = first_index(); c < cols; c += grid_stride()) {
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += static_cast<double>(dy[r * cols + c]);
    dbias[c] = static_cast<T>(static_cast<double>(dbias[c]) + sum);
  }
}

// y[i] = gelu(x[i]), one thread per element; each thread reads its x before
// writing its y, so y may alias x. 2·sizeof(T) bytes and ~12 flops + one exp
// per element. No __restrict__: the pointers may alias.
template <class T>
__global__ void gelu_forward_kernel(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) y[i] = gelu_value(x[i]);
}

// dx[i] = dy[i]·gelu'(x[i]), one thread per element; dx may alias dy (each
// thread reads its own element before writing it). 3·sizeof(T) bytes and ~18
// flops + one exp per element.
template <class T>
__global__ void gelu_backward_kernel(T* dx, const T* x, const T* dy, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = dy[i] * gelu_slope(x[i]);
}

// y[i] += x[i], one thread per element. 3·sizeof(T) bytes, 1 flop per element.
template <class T>
__global__ void add_into_kernel(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) y[i] += x[i];
}

}  // namespace

template <class T>
void device_bias_add(T* y, const T* bias, std::int64_t rows, std::int64_t cols, void* stream) {
  check_size("device_bias_add", "rows", rows);
  check_size("device_bias_add", "cols", cols);
  if (rows == 0 || cols == 0) return;
  const std::int64_t count = rows * cols;
  bias_add_kernel<T>
      <<<grid_for(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, bias, count, cols);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_bias_backward(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols,
                          void* stream) {
  check_size("device_bias_backward", "rows", rows);
  check_size("device_bias_backward", "cols", cols);
  // rows = 0 adds nothing: dbias += 0 would leave it bitwise unchanged (−0 aside), so skip it.
  if (rows == 0 || cols == 0) return;
  bias_backward_kernel<T>
      <<<grid_for(cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dbias, dy, rows, cols);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_gelu_forward(T* y, const T* x, std::int64_t n, void* stream) {
  check_size("device_gelu_forward", "n", n);
  if (n == 0) return;
  gelu_forward_kernel<T><<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, x, n);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_gelu_backward(T* dx, const T* x, const T* dy, std::int64_t n, void* stream) {
  check_size("device_gelu_backward", "n", n);
  if (n == 0) return;
  gelu_backward_kernel<T>
      <<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dx, x, dy, n);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_add_into(T* y, const T* x, std::int64_t n, void* stream) {
  check_size("device_add_into", "n", n);
  if (n == 0) return;
  add_into_kernel<T><<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, x, n);
  DTW_CUDA_CHECK_LAUNCH();
}

#define DTW_INSTANTIATE(T)                                                                \
  template void device_bias_add<T>(T*, const T*, std::int64_t, std::int64_t, void*);      \
  template void device_bias_backward<T>(T*, const T*, std::int64_t, std::int64_t, void*); \
  template void device_gelu_forward<T>(T*, const T*, std::int64_t, void*);                \
  template void device_gelu_backward<T>(T*, const T*, const T*, std::int64_t, void*);     \
  template void device_add_into<T>(T*, const T*, std::int64_t, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
