// Layer normalisation on a CUDA device, matching layernorm.cpp's kernels:
// statistics and row sums in double, the elementwise arithmetic in T with the
// saved (rounded) mean and rstd. Rows are independent, so the forward pass and
// dx take one block per row; dgamma and dbeta sum down the rows, so they take
// one block per strip of columns. Every sum has a fixed order (row_reduce.cuh):
// the results are bitwise the same run to run.
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_layernorm.h"
#include "row_reduce.cuh"

namespace dtw::kernels {
namespace {

using cuda_detail::Add;
using cuda_detail::block_reduce;
using cuda_detail::grid_for;
using cuda_detail::kThreads;

void check_sizes(const char* kernel, std::int64_t rows, std::int64_t cols) {
  DTW_CHECK_ARG(rows >= 0 && cols >= 0, kernel << ": sizes must not be negative (rows " << rows
                                               << ", cols " << cols << ")");
}

// One block per row (grid-stride over rows; r is uniform within a block, so
// the barriers in block_reduce are reached by every thread). Thread t takes
// columns t, t + kThreads, ...: consecutive threads read consecutive elements.
// Two passes over the row (mean, then squared deviations: the one-pass
// E[x²] − E[x]² cancels badly), then y, each element written by the thread that
// read it (so y may alias x). Per element: 3 reads of x, 1 each of
// gamma and beta, 1 write of y; ~8 flops.
template <class T>
__global__ void layernorm_forward_kernel(T* y, T* __restrict__ mean,
                                         T* __restrict__ rstd, const T* x,
                                         const T* __restrict__ gamma, const T* __restrict__ beta,
                                         std::int64_t rows, std::int64_t cols, double eps) {
  // A row of no columns: sums of 0, divided by 1 (mean 0, rstd 1/√eps, as the host).
  const double n = cols == 0 ? 1.0 : static_cast<double>(cols);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    double part = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) part += static_cast<double>(xr[c]);
    // Dividing (not multiplying by 1/n), as the host does.
    const double mu = block_reduce(part, Add{}) / n;
    part = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const double d = static_cast<double>(xr[c]) - mu;
      part += d * d;
    }
    const double var = block_reduce(part, Add{}) / n;
    const T m = static_cast<T>(mu);
    const T s = static_cast<T>(1.0 / sqrt(var + eps));
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
    T* yr = y + r * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
  }
}

// dgamma and dbeta: column sums over rows. A block is 32 columns (threadIdx.x,
// consecutive threads on consecutive columns: coalesced) by kRowLanes row lanes
// (threadIdx.y); lane j sums rows j, j + kRowLanes, ... in order, then lane 0
// adds the kRowLanes partials in lane order and accumulates into dgamma/dbeta.
// Grid-stride over strips (uniform per block, so the barrier is too). Per
// element of dy: reads of dy and x, ~5 flops; per column: a read and a write
// of dgamma and of dbeta.
constexpr int kStrip = 32;
constexpr int kRowLanes = kThreads / kStrip;

template <class T>
__global__ void layernorm_params_kernel(T* __restrict__ dgamma, T* __restrict__ dbeta,
                                        const T* __restrict__ dy, const T* __restrict__ x,
                                        const T* __restrict__ mean, const T* __restrict__ rstd,
                                        std::int64_t rows, std::int64_t cols) {
  __shared__ double part_gamma[kRowLanes][kStrip];
  __shared__ double part_beta[kRowLanes][kStrip];
  const std::int64_t strips = (cols + kStrip - 1) / kStrip;
  for (std::int64_t strip = blockIdx.x; strip < strips; strip += gridDim.x) {
    const std::int64_t c = strip * kStrip + threadIdx.x;
    double sum_gamma = 0, sum_beta = 0;
    if (c < cols) {
      for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
        const T d = dy[r * cols + c];
        // The same roundings as the host: x̂ in T, the product in T, summed in double.
        sum_gamma += static_cast<double>(d * ((x[r * cols + c] - mean[r]) * rstd[r]));
        sum_beta += static_cast<double>(d);
      }
    }
    part_gamma[threadIdx.y][threadIdx.x] = sum_gamma;
    part_beta[threadIdx.y][threadIdx.x] = sum_beta;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      double g = 0, b = 0;
      for (int j = 0; j < kRowLanes; ++j) {
        g += part_gamma[j][threadIdx.x];
        b += part_beta[j][threadIdx.x];
      }
      dgamma[c] = static_cast<T>(static_cast<double>(dgamma[c]) + g);
      dbeta[c] = static_cast<T>(static_cast<double>(dbeta[c]) + b);
    }
    __syncthreads();  // the partials are read before the next strip writes them
  }
}

// dx = r·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·gamma, one block per row as
// in the forward pass. Both row sums finish (block_reduce's barriers) before
// any dx is written, and each thread writes only the elements it read, so dx
// may alias dy. Per element: 2 reads each of dy, x and gamma, 1 write; ~12 flops.
template <class T>
__global__ void layernorm_dx_kernel(T* dx, const T* dy, const T* __restrict__ x,
                                    const T* __restrict__ mean, const T* __restrict__ rstd,
                                    const T* __restrict__ gamma, std::int64_t rows,
                                    std::int64_t cols) {
  const double inv_cols = 1.0 / static_cast<double>(cols);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * cols;
    const T* xr = x + r * cols;
    const T m = mean[r], s = rstd[r];
    double part_g = 0, part_gx = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const double g = static_cast<double>(dyr[c] * gamma[c]);
      part_g += g;
      part_gx += g * static_cast<double>((xr[c] - m) * s);
    }
    const T mean_g = static_cast<T>(block_reduce(part_g, Add{}) * inv_cols);
    const T mean_gx = static_cast<T>(block_reduce(part_gx, Add{}) * inv_cols);
    T* dxr = dx + r * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += kThreads)
      dxr[c] = s * (dyr[c] * gamma[c] - mean_g - (xr[c] - m) * s * mean_gx);
  }
}

}  // namespace

template <class T>
void device_layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                              std::int64_t rows, std::int64_t cols, T eps, void* stream) {
  check_sizes("device_layernorm_forward", rows, cols);
  if (rows == 0) return;
  layernorm_forward_kernel<T><<<grid_for(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      y, mean, rstd, x, gamma, beta, rows, cols, static_cast<double>(eps));
  DTW_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void device_layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                               const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                               std::int64_t cols, void* stream) {
  check_sizes("device_layernorm_backward", rows, cols);
  if (rows == 0 || cols == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  // dgamma and dbeta first, while dy is intact: dx may alias dy. The stream orders the two.
  const std::int64_t strips = (cols + kStrip - 1) / kStrip;
  layernorm_params_kernel<T><<<grid_for(strips), dim3(kStrip, kRowLanes), 0, st>>>(
      dgamma, dbeta, dy, x, mean, rstd, rows, cols);
  DTW_CUDA_CHECK(cudaGetLastError());
  layernorm_dx_kernel<T><<<grid_for(rows), kThreads, 0, st>>>(dx, dy, x, mean, rstd, gamma, rows,
                                                               cols);
  DTW_CUDA_CHECK(cudaGetLastError());
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void device_layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*,             \
                                            std::int64_t, std::int64_t, T, void*);                \
  template void device_layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, \
                                             const T*, std::int64_t, std::int64_t, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
