#pragma once
// Helpers shared by the row-wise CUDA kernels (layernorm, softmax, cross
// entropy): a block-wide reduction whose order is fixed by the thread index
// alone, so a result is bitwise the same on every run (no atomics), and the
// grid size for kernels that take one row per block.
#include <cstdint>

namespace dtw::kernels::cuda_detail {

// Every row kernel runs kThreads threads per block; the tree below needs a power of two.
constexpr int kThreads = 256;
static_assert((kThreads & (kThreads - 1)) == 0, "the reduction tree halves kThreads");

// Blocks for a grid-stride loop over `items` (rows, strips): one per item up
// to a cap, so a huge count never meets a launch limit (gridDim.x allows
// 2^31 - 1, the cap is far below it) and the loop covers the rest. 0 items: 0
// blocks, which the callers never launch.
inline unsigned grid_for(std::int64_t items) {
  constexpr std::int64_t kMaxBlocks = 65535;
  return static_cast<unsigned>(items < kMaxBlocks ? items : kMaxBlocks);
}

// exp in T: expf for float (the CUDA maths library's float exp, at most 2 ulp
// off), exp for double (at most 1 ulp), named apart so that no overload
// resolution can silently pick the double one for a float.
__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }

struct Add {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Max {
  // A NaN in b is skipped unless a is NaN already, like the host's row_max.
  __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

// Combines every thread's v with op over the block and returns the result to
// all threads. A fixed tree over threadIdx.x: the same inputs give the same
// bits. Every thread of the block must call it (it holds __syncthreads), so it
// is only called where the control flow is uniform across the block. The
// buffer is free again on return (the last barrier orders the reads of buf[0]
// before any later call writes it).
template <class Op>
__device__ double block_reduce(double v, Op op) {
  __shared__ double buf[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  buf[t] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] = op(buf[t], buf[t + s]);
    __syncthreads();
  }
  const double result = buf[0];
  __syncthreads();
  return result;
}

}  // namespace dtw::kernels::cuda_detail
