// Optimiser steps and gradient clipping on a CUDA device.
//
// The steps are element-wise (element i touches only index i), one thread per
// element in a grid-stride loop, no atomics. To agree with the host to the
// bit they do the host's double operations in the host's order through the
// _rn intrinsics, which nvcc never fuses into a multiply-add (it would fuse
// plain a*b + c, and the x86-64 host build does not). The sum of squares is a
// two-pass tree reduction whose shape depends only on n, so its bits are the
// same every run.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/cuda_optim.h"
#include "stream_scratch.cuh"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;
// Pass 1 of the sum of squares has at most this many blocks (pass 2 is one
// block of this many threads, each taking one partial sum).
constexpr int kSumBlocks = 1024;

int blocks_for(std::int64_t work) {
  const std::int64_t wanted = (work + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dadd_rn(a, -b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }

// Hyper-parameters as adamw_step_reference holds them: 1 − β and the bias
// corrections computed once on the host.
struct AdamWArgs {
  double beta1, beta2, one_minus_beta1, one_minus_beta2, correction1, correction2, lr, eps,
      weight_decay;
};

// One AdamW step per element i: reads p, g, m, v and writes p, m, v (7
// elements of T moved), about 15 double flops and a sqrt. The operations and
// their order are adamw_step_reference's.
template <class T>
__global__ void adamw_kernel(T* params, const T* grads, T* m, T* v, std::int64_t n, AdamWArgs a) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double g = static_cast<double>(grads[i]), p = static_cast<double>(params[i]);
    const double m_new = add(mul(a.beta1, static_cast<double>(m[i])), mul(a.one_minus_beta1, g));
    const double v_new =
        add(mul(a.beta2, static_cast<double>(v[i])), mul(mul(a.one_minus_beta2, g), g));
    const double m_hat = div(m_new, a.correction1), v_hat = div(v_new, a.correction2);
    m[i] = static_cast<T>(m_new);
    v[i] = static_cast<T>(v_new);
    const double update = add(div(m_hat, add(__dsqrt_rn(v_hat), a.eps)), mul(a.weight_decay, p));
    params[i] = static_cast<T>(sub(p, mul(a.lr, update)));
  }
}

// One SGD step per element i: reads p, g (and velocity), writes p (and
// velocity): 3 to 5 elements of T moved, 4 to 6 double flops, in
// sgd_step_reference's order.
template <class T>
__global__ void sgd_kernel(T* params, const T* grads, T* velocity, std::int64_t n, double lr,
                           double momentum, double weight_decay) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double p = static_cast<double>(params[i]);
    double step = add(static_cast<double>(grads[i]), mul(weight_decay, p));
    if (momentum != 0) {
      step = add(mul(momentum, static_cast<double>(velocity[i])), step);
      velocity[i] = static_cast<T>(step);
    }
    params[i] = static_cast<T>(sub(p, mul(lr, step)));
  }
}

// x[i] *= factor, one thread per element (grid-stride): 2 elements of T
// moved, 1 flop.
template <class T>
__global__ void scale_kernel(T* x, std::int64_t n, T factor) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] *= factor;
}

// In-place tree sum of s[0, kWidth) into s[0] by the block's kWidth threads,
// always pairing the same elements. Every thread of the block calls it (the
// barriers are outside any branch).
template <int kWidth>
__device__ void block_tree_sum(double* s) {
  __syncthreads();
  for (int half = kWidth / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) s[threadIdx.x] = add(s[threadIdx.x], s[threadIdx.x + half]);
    __syncthreads();
  }
}

// Pass 1: block b's thread t sums x[i]² in double over i = b·kThreads + t +
// k·gridDim.x·kThreads, then the block sums its threads' totals in a fixed
// tree into partial[b]. sizeof(T) read and 2 flops per element.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sum_squares_partial_kernel(const T* __restrict__ x, std::int64_t n, double* partial) {
  __shared__ double s[kThreads];
  double acc = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += stride) {
    const double xi = static_cast<double>(x[i]);
    acc = add(acc, mul(xi, xi));
  }
  s[threadIdx.x] = acc;
  block_tree_sum<kThreads>(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// Pass 2: one block of kSumBlocks threads; thread t takes partial[t] (0 past
// `count`), then the fixed tree gives *result.
__global__ void __launch_bounds__(kSumBlocks)
    sum_squares_final_kernel(const double* __restrict__ partial, int count, double* result) {
  __shared__ double s[kSumBlocks];
  s[threadIdx.x] = static_cast<int>(threadIdx.x) < count ? partial[threadIdx.x] : 0.0;
  block_tree_sum<kSumBlocks>(s);
  if (threadIdx.x == 0) *result = s[0];
}

// optim.cpp's checks, with the device names.
void check_adamw(const void* params, const void* grads, const void* m, const void* v,
                 std::int64_t n, std::int64_t step, const AdamWConfig& c) {
  DTW_CHECK_ARG(n >= 0, "device_adamw_step: n " << n << " is negative");
  DTW_CHECK_ARG(step >= 1,
                "device_adamw_step: step " << step << " must be >= 1 (steps count from 1)");
  DTW_CHECK_ARG(c.lr >= 0, "device_adamw_step: lr " << c.lr << " is negative");
  DTW_CHECK_ARG(c.beta1 >= 0 && c.beta1 < 1,
                "device_adamw_step: beta1 " << c.beta1 << " is outside [0, 1)");
  DTW_CHECK_ARG(c.beta2 >= 0 && c.beta2 < 1,
                "device_adamw_step: beta2 " << c.beta2 << " is outside [0, 1)");
  DTW_CHECK_ARG(c.eps >= 0, "device_adamw_step: eps " << c.eps << " is negative");
  DTW_CHECK_ARG(c.weight_decay >= 0,
                "device_adamw_step: weight_decay " << c.weight_decay << " is negative");
  DTW_CHECK_ARG(n == 0 || (params && grads && m && v),
                "device_adamw_step: a null pointer among params, grads, m, v for n " << n);
}

void check_sgd(const void* params, const void* grads, const void* velocity, std::int64_t n,
               const SgdConfig& c) {
  DTW_CHECK_ARG(n >= 0, "device_sgd_step: n " << n << " is negative");
  DTW_CHECK_ARG(c.lr >= 0, "device_sgd_step: lr " << c.lr << " is negative");
  DTW_CHECK_ARG(c.momentum >= 0, "device_sgd_step: momentum " << c.momentum << " is negative");
  DTW_CHECK_ARG(c.weight_decay >= 0,
                "device_sgd_step: weight_decay " << c.weight_decay << " is negative");
  DTW_CHECK_ARG(n == 0 || (params && grads),
                "device_sgd_step: a null pointer among params, grads for n " << n);
  DTW_CHECK_ARG(n == 0 || c.momentum == 0 || velocity,
                "device_sgd_step: momentum " << c.momentum << " needs a velocity buffer, got nullptr");
}

}  // namespace

template <class T>
void device_adamw_step(T* params, const T* grads, T* m, T* v, std::int64_t n, std::int64_t step,
                       const AdamWConfig& config, void* stream) {
  check_adamw(params, grads, m, v, n, step, config);
  if (n == 0) return;
  const double b1 = config.beta1, b2 = config.beta2, t = static_cast<double>(step);
  const AdamWArgs args{b1,        b2,        1.0 - b1,   1.0 - b2,           1.0 - std::pow(b1, t),
                       1.0 - std::pow(b2, t), config.lr, config.eps, config.weight_decay};
  adamw_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      params, grads, m, v, n, args);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_sgd_step(T* params, const T* grads, T* velocity, std::int64_t n,
                     const SgdConfig& config, void* stream) {
  check_sgd(params, grads, velocity, n, config);
  if (n == 0) return;
  sgd_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      params, grads, velocity, n, config.lr, config.momentum, config.weight_decay);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
double device_sum_of_squares(const T* x, std::int64_t n, void* stream) {
  DTW_CHECK_ARG(n >= 0, "device_sum_of_squares: n " << n << " is negative");
  if (n == 0) return 0.0;
  DTW_CHECK_ARG(x, "device_sum_of_squares: x is null for n " << n);
  auto* st = static_cast<cudaStream_t>(stream);
  const std::int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < kSumBlocks ? wanted : kSumBlocks);
  // partial[0, kSumBlocks) then the result.
  cuda_detail::StreamScratch<double> scratch(kSumBlocks + 1, st);
  double* partial = scratch.get();
  double* result = partial + kSumBlocks;
  sum_squares_partial_kernel<T><<<blocks, kThreads, 0, st>>>(x, n, partial);
  DTW_CUDA_CHECK_LAUNCH();
  sum_squares_final_kernel<<<1, kSumBlocks, 0, st>>>(partial, blocks, result);
  DTW_CUDA_CHECK_LAUNCH();
  double sum = 0;
  DTW_CUDA_CHECK(cudaMemcpyAsync(&sum, result, sizeof sum, cudaMemcpyDeviceToHost, st));
  DTW_CUDA_CHECK(cudaStreamSynchronize(st));
  return sum;
}

template <class T>
void device_scale(T* x, std::int64_t n, T factor, void* stream) {
  DTW_CHECK_ARG(n >= 0, "device_scale: n " << n << " is negative");
  if (n == 0) return;
  DTW_CHECK_ARG(x, "device_scale: x is null for n " << n);
  scale_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, n, factor);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
double device_clip_grad_norm(T* grads, std::int64_t n, double max_norm, void* stream) {
  DTW_CHECK_ARG(max_norm > 0, "device_clip_grad_norm: max_norm " << max_norm << " must be > 0");
  DTW_CHECK_ARG(n >= 0, "device_clip_grad_norm: n " << n << " is negative");
  const double norm = std::sqrt(device_sum_of_squares(grads, n, stream));
  // clip_grad_norm's rule: a NaN norm compares false and leaves grads alone.
  if (norm > max_norm) device_scale(grads, n, static_cast<T>(max_norm / (norm + 1e-6)), stream);
  return norm;
}

#define DTW_INSTANTIATE(T)                                                                     \
  template void device_adamw_step<T>(T*, const T*, T*, T*, std::int64_t, std::int64_t,         \
                                     const AdamWConfig&, void*);                               \
  template void device_sgd_step<T>(T*, const T*, T*, std::int64_t, const SgdConfig&, void*);   \
  template double device_sum_of_squares<T>(const T*, std::int64_t, void*);                     \
  template void device_scale<T>(T*, std::int64_t, T, void*);                                   \
  template double device_clip_grad_norm<T>(T*, std::int64_t, double, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
