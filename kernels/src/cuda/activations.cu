// Bias add, GELU and add_into on a CUDA device. All memory-bound: each kernel
// is a grid-stride loop over its elements, sized to fill every SM a few times.
// Where every pointer is 16-byte aligned, the element-wise kernels move 16
// bytes per load and store (4 floats, 2 doubles), and a scalar loop takes the
// tail: with one 4-byte load per thread in flight, GELU reached 77% of a
// device copy on an H100; more bytes in flight per thread is what it lacked.
// GELU uses the host kernel's formula (activations.cpp): gelu(x) = x / (1 + e)
// with e = e^(−2u), u = √(2/π)(x + 0.044715x³), the exponent clamped as
// detail::exp_saturating does, so e and 1/(1 + e) stay finite and e·s never
// becomes ∞·0. expf/exp are CUDA's full-precision ones (≤ 2 ulp and ≤ 1 ulp);
// the build has no --use_fast_math.
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_activations.h"
#include "stream_scratch.cuh"

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

// 16 bytes of T in registers: loaded and stored as one uint4, used as kPer<T>
// elements (memcpy between the two is a register move, not memory traffic).
template <class T>
constexpr int kPer = static_cast<int>(16 / sizeof(T));
template <class T>
struct Pack {
  T v[kPer<T>];
};
template <class T>
__device__ __forceinline__ Pack<T> load16(const T* p, std::int64_t vec) {
  const uint4 raw = reinterpret_cast<const uint4*>(p)[vec];
  Pack<T> out;
  memcpy(out.v, &raw, sizeof(raw));
  return out;
}
template <class T>
__device__ __forceinline__ void store16(T* p, std::int64_t vec, const Pack<T>& in) {
  uint4 raw;
  memcpy(&raw, in.v, sizeof(raw));
  reinterpret_cast<uint4*>(p)[vec] = raw;
}

// Whole 16-byte vectors in n elements when every pointer is 16-byte aligned, else 0.
template <class T>
std::int64_t vectors(std::int64_t n, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return 0;
  return n / kPer<T>;
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

// y[i] += bias[i mod cols] over the flattened rows×cols matrix (consecutive
// threads, consecutive addresses; bias stays in cache). The first nvec
// 16-byte vectors go whole -- nvec > 0 only when cols is a multiple of kPer,
// so a vector never straddles two rows and its bias is one aligned vector --
// the rest one element at a time. About 2·sizeof(T) bytes of memory traffic
// per element (bias hits the cache), 1 flop.
template <class T>
__global__ void bias_add_kernel(T* __restrict__ y, const T* __restrict__ bias, std::int64_t count,
                                std::int64_t cols, std::int64_t nvec) {
  for (std::int64_t v = first_index(); v < nvec; v += grid_stride()) {
    Pack<T> a = load16(y, v);
    const Pack<T> b = load16(bias, (v * kPer<T> % cols) / kPer<T>);
#pragma unroll
    for (int k = 0; k < kPer<T>; ++k) a.v[k] += b.v[k];
    store16(y, v, a);
  }
  for (std::int64_t i = nvec * kPer<T> + first_index(); i < count; i += grid_stride())
    y[i] += bias[i % cols];
}

// Rows summed in chunks of kBiasRows: partial[chunk][c] = Σ dy[r][c] over the
// chunk's rows in order, in double, one thread per (chunk, column); a warp
// reads 32 adjacent columns of one row (coalesced). One thread per column
// alone gave only `cols` threads -- 4% of a device copy at 16384×3072.
constexpr std::int64_t kBiasRows = 64;
template <class T>
__global__ void bias_partial_kernel(double* __restrict__ partial, const T* __restrict__ dy,
                                    std::int64_t rows, std::int64_t cols, std::int64_t chunks) {
  for (std::int64_t e = first_index(); e < chunks * cols; e += grid_stride()) {
    const std::int64_t chunk = e / cols;
    const std::int64_t c = e - chunk * cols;
    const std::int64_t end = (chunk + 1) * kBiasRows < rows ? (chunk + 1) * kBiasRows : rows;
    double sum = 0;
    for (std::int64_t r = chunk * kBiasRows; r < end; ++r) sum += static_cast<double>(dy[r * cols + c]);
    partial[e] = sum;
  }
}

// dbias[c] += Σ partial[chunk][c] over the chunks in order, one thread per
// column. The order depends only on rows and cols, never on the launch or
// the timing: no atomics, the same bits every run.
template <class T>
__global__ void bias_finish_kernel(T* __restrict__ dbias, const double* __restrict__ partial,
                                   std::int64_t cols, std::int64_t chunks) {
  for (std::int64_t c = first_index(); c < cols; c += grid_stride()) {
    double sum = 0;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial[chunk * cols + c];
    dbias[c] = static_cast<T>(static_cast<double>(dbias[c]) + sum);
  }
}

// y[i] = gelu(x[i]), one thread per element; each thread reads its x before
// writing its y, so y may alias x. 2·sizeof(T) bytes and ~12 flops + one exp
// per element. No __restrict__: the pointers may alias.
template <class T>
__global__ void gelu_forward_kernel(T* y, const T* x, std::int64_t n, std::int64_t nvec) {
  for (std::int64_t v = first_index(); v < nvec; v += grid_stride()) {
    Pack<T> a = load16(x, v);
#pragma unroll
    for (int k = 0; k < kPer<T>; ++k) a.v[k] = gelu_value(a.v[k]);
    store16(y, v, a);
  }
  for (std::int64_t i = nvec * kPer<T> + first_index(); i < n; i += grid_stride())
    y[i] = gelu_value(x[i]);
}

// dx[i] = dy[i]·gelu'(x[i]), one thread per element; dx may alias dy (each
// thread reads its own element before writing it). 3·sizeof(T) bytes and ~18
// flops + one exp per element.
template <class T>
__global__ void gelu_backward_kernel(T* dx, const T* x, const T* dy, std::int64_t n,
                                     std::int64_t nvec) {
  for (std::int64_t v = first_index(); v < nvec; v += grid_stride()) {
    const Pack<T> a = load16(x, v);
    Pack<T> g = load16(dy, v);
#pragma unroll
    for (int k = 0; k < kPer<T>; ++k) g.v[k] = g.v[k] * gelu_slope(a.v[k]);
    store16(dx, v, g);
  }
  for (std::int64_t i = nvec * kPer<T> + first_index(); i < n; i += grid_stride())
    dx[i] = dy[i] * gelu_slope(x[i]);
}

// y[i] += x[i], one thread per element. 3·sizeof(T) bytes, 1 flop per element.
template <class T>
__global__ void add_into_kernel(T* y, const T* x, std::int64_t n, std::int64_t nvec) {
  for (std::int64_t v = first_index(); v < nvec; v += grid_stride()) {
    Pack<T> a = load16(y, v);
    const Pack<T> b = load16(x, v);
#pragma unroll
    for (int k = 0; k < kPer<T>; ++k) a.v[k] += b.v[k];
    store16(y, v, a);
  }
  for (std::int64_t i = nvec * kPer<T> + first_index(); i < n; i += grid_stride()) y[i] += x[i];
}

}  // namespace

template <class T>
void device_bias_add(T* y, const T* bias, std::int64_t rows, std::int64_t cols, void* stream) {
  check_size("device_bias_add", "rows", rows);
  check_size("device_bias_add", "cols", cols);
  if (rows == 0 || cols == 0) return;
  const std::int64_t count = rows * cols;
  const std::int64_t nvec = cols % kPer<T> == 0 ? vectors<T>(count, {y, bias}) : 0;
  bias_add_kernel<T><<<grid_for(nvec > 0 ? nvec : count), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(y, bias, count, cols, nvec);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_bias_backward(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols,
                          void* stream) {
  check_size("device_bias_backward", "rows", rows);
  check_size("device_bias_backward", "cols", cols);
  // rows = 0 adds nothing: dbias += 0 would leave it bitwise unchanged (−0 aside), so skip it.
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const std::int64_t chunks = (rows + kBiasRows - 1) / kBiasRows;
  const cuda_detail::StreamScratch<double> partial(chunks * cols, s);
  bias_partial_kernel<T><<<grid_for(chunks * cols), kThreads, 0, s>>>(partial.get(), dy, rows, cols, chunks);
  DTW_CUDA_CHECK_LAUNCH();
  bias_finish_kernel<T><<<grid_for(cols), kThreads, 0, s>>>(dbias, partial.get(), cols, chunks);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_gelu_forward(T* y, const T* x, std::int64_t n, void* stream) {
  check_size("device_gelu_forward", "n", n);
  if (n == 0) return;
  const std::int64_t nvec = vectors<T>(n, {y, x});
  gelu_forward_kernel<T><<<grid_for(nvec > 0 ? nvec : n), kThreads, 0,
                           static_cast<cudaStream_t>(stream)>>>(y, x, n, nvec);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_gelu_backward(T* dx, const T* x, const T* dy, std::int64_t n, void* stream) {
  check_size("device_gelu_backward", "n", n);
  if (n == 0) return;
  const std::int64_t nvec = vectors<T>(n, {dx, x, dy});
  gelu_backward_kernel<T><<<grid_for(nvec > 0 ? nvec : n), kThreads, 0,
                            static_cast<cudaStream_t>(stream)>>>(dx, x, dy, n, nvec);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_add_into(T* y, const T* x, std::int64_t n, void* stream) {
  check_size("device_add_into", "n", n);
  if (n == 0) return;
  const std::int64_t nvec = vectors<T>(n, {y, x});
  add_into_kernel<T><<<grid_for(nvec > 0 ? nvec : n), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(y, x, n, nvec);
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
