// A vocabulary slice's embedding and cross-entropy pieces on a CUDA device,
// matching vocab_slice.cpp. No floating-point atomics: the lookup is a
// gather, its backward reuses the embedding's sort-then-sum-in-token-order
// kernel on ids made local, and the row pieces take one block per row with
// row_reduce.cuh's fixed tree. The maxima, the lookup and both backwards are
// the host's bits; sums of exponentials go through CUDA's exp and a tree in
// double, so they (and what follows from them) differ by rounding.
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/cuda_embedding.h"
#include "dtw/kernels/cuda_vocab_slice.h"
#include "row_reduce.cuh"
#include "stream_scratch.cuh"
#include "../layout_checks.h"

namespace dtw::kernels {
namespace {

using detail::check_lookup;
using detail::check_rows;

using cuda_detail::Add;
using cuda_detail::block_reduce;
using cuda_detail::exp_of;
using cuda_detail::grid_for;
using cuda_detail::kThreads;

unsigned elements_grid(std::int64_t n) {
  return grid_for((n + kThreads - 1) / kThreads);
}

// Grid-stride over the elements of the output: a held id copies its row, any
// other writes 0. One read of T per held element, one write per element.
template <class T>
__global__ void forward_kernel(T* __restrict__ out, const std::int32_t* __restrict__ ids,
                               const T* __restrict__ table, std::int64_t total, std::int64_t dim,
                               std::int64_t v0, std::int64_t v1) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const std::int64_t i = e / dim, c = e - i * dim, id = ids[i];
    out[e] = id >= v0 && id < v1 ? table[(id - v0) * dim + c] : T(0);
  }
}

// local[i] = ids[i] − v0 inside the slice, −1 outside (which the embedding's
// backward drops).
__global__ void localise_kernel(std::int32_t* __restrict__ local,
                                const std::int32_t* __restrict__ ids, std::int64_t n,
                                std::int64_t v0, std::int64_t v1) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t id = ids[i];
    local[i] = id >= v0 && id < v1 ? static_cast<std::int32_t>(id - v0) : -1;
  }
}

// The first of equal maxima, as std::max_element: a max is exact, so any
// tree gives the host's value (NaNs aside).
struct MaxOf {
  __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

// One block per row (grid-stride, uniform per block for the barriers).
template <class T>
__global__ void row_max_kernel(T* __restrict__ row_max, const T* __restrict__ logits,
                               std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* lr = logits + r * cols;
    double part = static_cast<double>(lr[0]);
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      part = MaxOf{}(part, static_cast<double>(lr[c]));
    const double m = block_reduce(part, MaxOf{});
    if (threadIdx.x == 0) row_max[r] = static_cast<T>(m);
  }
}

template <class T>
__global__ void exp_sums_kernel(T* __restrict__ sums, const T* __restrict__ logits,
                                const T* __restrict__ row_max,
                                const std::int32_t* __restrict__ targets, std::int64_t rows,
                                std::int64_t cols, std::int64_t v0) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* lr = logits + r * cols;
    const T m = row_max[r];
    double part = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      part += static_cast<double>(exp_of(lr[c] - m));
    const double sum = block_reduce(part, Add{});
    if (threadIdx.x == 0) {
      sums[r] = static_cast<T>(sum);
      const std::int64_t t = static_cast<std::int64_t>(targets[r]) - v0;
      sums[rows + r] = t >= 0 && t < cols ? lr[t] : T(0);
    }
  }
}

template <class T>
__global__ void loss_kernel(T* __restrict__ probs, T* __restrict__ losses,
                            const T* __restrict__ logits, const T* __restrict__ row_max,
                            const T* __restrict__ sums, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T m = row_max[r], s = sums[r];
    if (threadIdx.x == 0) losses[r] = log(s) + m - sums[rows + r];
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      probs[r * cols + c] = exp_of(logits[r * cols + c] - m) / s;
  }
}

// One block: thread t sums rows t, t + kThreads, ... then the fixed tree.
template <class T>
__global__ void mean_kernel(const T* __restrict__ losses, std::int64_t rows, double* mean) {
  double part = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += kThreads)
    part += static_cast<double>(losses[r]);
  const double total = block_reduce(part, Add{});
  if (threadIdx.x == 0) *mean = total / static_cast<double>(rows);
}

// dloss·p and then − dloss, each rounded (no fused multiply-add), as the host does.
__device__ inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}

template <class T>
__global__ void backward_kernel(T* __restrict__ dlogits, const T* __restrict__ probs,
                                const std::int32_t* __restrict__ targets, std::int64_t rows,
                                std::int64_t cols, std::int64_t v0, T dloss) {
  const std::int64_t total = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const std::int64_t r = e / cols, c = e - r * cols;
    const T scaled = mul_rn(dloss, probs[e]);
    dlogits[e] = static_cast<std::int64_t>(targets[r]) - v0 == c ? scaled - dloss : scaled;
  }
}

}  // namespace

template <class T>
void device_vocab_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                                    std::int64_t dim, std::int64_t v0, std::int64_t v1,
                                    void* stream) {
  check_lookup("device_vocab_embedding_forward", n, dim, v0, v1);
  if (n == 0 || dim == 0) return;
  forward_kernel<T><<<elements_grid(n * dim), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      out, ids, table, n * dim, dim, v0, v1);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_vocab_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout,
                                     std::int64_t n, std::int64_t dim, std::int64_t v0,
                                     std::int64_t v1, void* stream) {
  check_lookup("device_vocab_embedding_backward", n, dim, v0, v1);
  if (n == 0 || dim == 0 || v1 == v0) return;
  DTW_CHECK_ARG(n <= INT_MAX, "device_vocab_embedding_backward: n " << n << " exceeds " << INT_MAX
                                                                    << " (ids sort as int32)");
  auto* st = static_cast<cudaStream_t>(stream);
  cuda_detail::StreamScratch<std::int32_t> local(n, st);
  localise_kernel<<<elements_grid(n), kThreads, 0, st>>>(local.get(), ids, n, v0, v1);
  DTW_CUDA_CHECK_LAUNCH();
  device_embedding_backward(dtable, local.get(), dout, n, dim, v1 - v0, stream);
}

template <class T>
void device_vocab_row_max(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols,
                          void* stream) {
  check_rows("device_vocab_row_max", rows, cols);
  if (rows == 0) return;
  row_max_kernel<T><<<grid_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      row_max, logits, rows, cols);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_vocab_exp_sums(T* sums, const T* logits, const T* row_max, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t cols, std::int64_t v0, void* stream) {
  check_rows("device_vocab_exp_sums", rows, cols);
  if (rows == 0) return;
  exp_sums_kernel<T><<<grid_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      sums, logits, row_max, targets, rows, cols, v0);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
T device_vocab_cross_entropy(T* probs, T* losses, const T* logits, const T* row_max, const T* sums,
                             std::int64_t rows, std::int64_t cols, void* stream) {
  check_rows("device_vocab_cross_entropy", rows, cols);
  if (rows == 0) return T(0);
  auto* st = static_cast<cudaStream_t>(stream);
  loss_kernel<T>
      <<<grid_for(rows), kThreads, 0, st>>>(probs, losses, logits, row_max, sums, rows, cols);
  DTW_CUDA_CHECK_LAUNCH();
  const cuda_detail::StreamScratch<double> mean(1, st);
  mean_kernel<T><<<1, kThreads, 0, st>>>(losses, rows, mean.get());
  DTW_CUDA_CHECK_LAUNCH();
  double host = 0;
  DTW_CUDA_CHECK(cudaMemcpyAsync(&host, mean.get(), sizeof host, cudaMemcpyDeviceToHost, st));
  DTW_CUDA_CHECK(cudaStreamSynchronize(st));
  return static_cast<T>(host);
}

template <class T>
void device_vocab_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                         std::int64_t rows, std::int64_t cols, std::int64_t v0,
                                         T dloss, void* stream) {
  check_rows("device_vocab_cross_entropy_backward", rows, cols);
  if (rows == 0) return;
  backward_kernel<T>
      <<<elements_grid(rows * cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          dlogits, probs, targets, rows, cols, v0, dloss);
  DTW_CUDA_CHECK_LAUNCH();
}

#define DTW_INSTANTIATE(T)                                                                         \
  template void device_vocab_embedding_forward<T>(T*, const std::int32_t*, const T*, std::int64_t, \
                                                  std::int64_t, std::int64_t, std::int64_t,        \
                                                  void*);                                          \
  template void device_vocab_embedding_backward<T>(T*, const std::int32_t*, const T*,              \
                                                   std::int64_t, std::int64_t, std::int64_t,       \
                                                   std::int64_t, void*);                           \
  template void device_vocab_row_max<T>(T*, const T*, std::int64_t, std::int64_t, void*);          \
  template void device_vocab_exp_sums<T>(T*, const T*, const T*, const std::int32_t*,              \
                                         std::int64_t, std::int64_t, std::int64_t, void*);         \
  template T device_vocab_cross_entropy<T>(T*, T*, const T*, const T*, const T*, std::int64_t,     \
                                           std::int64_t, void*);                                   \
  template void device_vocab_cross_entropy_backward<T>(                                            \
      T*, const T*, const std::int32_t*, std::int64_t, std::int64_t, std::int64_t, T, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
