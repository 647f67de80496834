// Fused softmax cross-entropy on a CUDA device, matching cross_entropy.cpp.
// Per row, with m the row maximum and S = Σ_c e^(logit_c − m):
//   probs_c = e^(logit_c − m) / S,   loss = (m − logit_target) + log S,
// the loss from log S (S ≥ 1), never from log(probs_target). The mean loss is
// summed on the device in a fixed order and is the one value copied back.
#include <cmath>
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_cross_entropy.h"
#include "stream_scratch.cuh"
#include "row_reduce.cuh"

namespace dtw::kernels {
namespace {

using cuda_detail::Add;
using cuda_detail::block_reduce;
using cuda_detail::exp_of;
using cuda_detail::grid_for;
using cuda_detail::kThreads;
using cuda_detail::Max;

constexpr unsigned long long kNoBadRow = ~0ull;

// What the forward call reads back: the mean loss, and the first row whose
// target is out of range (kNoBadRow if none).
struct ForwardResult {
  double mean;
  unsigned long long bad_row;
};

void check_sizes(const char* kernel, std::int64_t rows, std::int64_t vocab) {
  DTW_CHECK_ARG(rows >= 0 && vocab >= 0, kernel << ": sizes must not be negative (rows " << rows
                                                << ", vocab " << vocab << ")");
}

// One block per row (grid-stride over rows, uniform per block, so every
// thread reaches block_reduce's barriers); thread t takes columns t,
// t + kThreads, ... (coalesced). Every thread reads the target logit before
// the first barrier and probs are written only after the second, so probs may
// alias logits. A bad target is never used as an index: the row's loss is NaN
// and atomicMin (an integer atomic: the lowest bad row, whatever the order)
// records the row for the host. Per element: 3 reads of logits, 1 write of
// probs, 2 exps and ~4 flops; per row one read of targets, one write of losses.
template <class T>
__global__ void cross_entropy_forward_kernel(T* probs, T* __restrict__ losses, const T* logits,
                                             const std::int32_t* __restrict__ targets,
                                             std::int64_t rows, std::int64_t vocab,
                                             ForwardResult* __restrict__ result) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* lr = logits + r * vocab;
    const std::int64_t t = targets[r];
    const bool valid = t >= 0 && t < vocab;
    if (!valid && threadIdx.x == 0) atomicMin(&result->bad_row, static_cast<unsigned long long>(r));
    const double target_logit = valid ? static_cast<double>(lr[t]) : static_cast<double>(NAN);
    // Start from logits[0] as the host's row_max does (vocab 0: every target is bad anyway).
    double part = vocab > 0 ? static_cast<double>(lr[0]) : 0.0;
    for (std::int64_t c = threadIdx.x; c < vocab; c += kThreads)
      part = Max{}(part, static_cast<double>(lr[c]));
    const T max = static_cast<T>(block_reduce(part, Max{}));
    part = 0;
    for (std::int64_t c = threadIdx.x; c < vocab; c += kThreads)
      part += static_cast<double>(exp_of(lr[c] - max));
    const double sum = block_reduce(part, Add{});
    const T inv = static_cast<T>(1.0 / sum);  // one division per row, then multiplies
    T* pr = probs + r * vocab;
    for (std::int64_t c = threadIdx.x; c < vocab; c += kThreads) pr[c] = exp_of(lr[c] - max) * inv;
    // (m − logit_target) first, as on the host: adding log S to m first would
    // round it to the scale of m.
    if (threadIdx.x == 0)
      losses[r] = static_cast<T>((static_cast<double>(max) - target_logit) + log(sum));
  }
}

// The mean of the rows' losses: one block, thread t sums rows t, t + kThreads,
// ... in order, then block_reduce's fixed tree. Reads rows elements, writes one.
template <class T>
__global__ void mean_loss_kernel(const T* __restrict__ losses, std::int64_t rows,
                                 ForwardResult* __restrict__ result) {
  double part = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += kThreads) part += static_cast<double>(losses[r]);
  const double total = block_reduce(part, Add{});
  if (threadIdx.x == 0) result->mean = total / static_cast<double>(rows);
}

// One thread per element (grid-stride over rows·vocab, 64-bit indices),
// consecutive threads on consecutive elements. Each element is read and
// written by one thread, so dlogits may alias probs. Per element: one read of
// probs, one of targets (cached: a row shares it), one write, 1-2 flops.
template <class T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* probs,
                                              const std::int32_t* __restrict__ targets,
                                              std::int64_t rows, std::int64_t vocab, T dloss) {
  const std::int64_t n = rows * vocab;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / vocab;
    const std::int64_t t = targets[r];
    if (t < 0 || t >= vocab) {
      dlogits[i] = static_cast<T>(NAN);
    } else {
      const T p = probs[i];
      dlogits[i] = i - r * vocab == t ? dloss * (p - T(1)) : dloss * p;
    }
  }
}


}  // namespace

template <class T>
T device_cross_entropy_forward(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                               std::int64_t rows, std::int64_t vocab, void* stream) {
  check_sizes("device_cross_entropy_forward", rows, vocab);
  if (rows == 0) return T(0);
  auto* st = static_cast<cudaStream_t>(stream);
  const cuda_detail::StreamScratch<ForwardResult> scratch(1, st);
  ForwardResult* result = scratch.get();
  // All bytes 0xff: bad_row = kNoBadRow (mean is written by its kernel).
  DTW_CUDA_CHECK(cudaMemsetAsync(result, 0xff, sizeof(ForwardResult), st));
  cross_entropy_forward_kernel<T>
      <<<grid_for(rows), kThreads, 0, st>>>(probs, losses, logits, targets, rows, vocab, result);
  DTW_CUDA_CHECK(cudaGetLastError());
  mean_loss_kernel<T><<<1, kThreads, 0, st>>>(losses, rows, result);
  DTW_CUDA_CHECK(cudaGetLastError());
  ForwardResult host{};
  DTW_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(host), cudaMemcpyDeviceToHost, st));
  DTW_CUDA_CHECK(cudaStreamSynchronize(st));
  if (host.bad_row != kNoBadRow) {
    std::int32_t target = 0;
    DTW_CUDA_CHECK(cudaMemcpy(&target, targets + host.bad_row, sizeof(target),
                              cudaMemcpyDeviceToHost));
    DTW_CHECK_ARG(false, "device_cross_entropy_forward: row " << host.bad_row << " has target "
                                                              << target << " outside [0, "
                                                              << vocab << ")");
  }
  return static_cast<T>(host.mean);
}

template <class T>
void device_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                   std::int64_t rows, std::int64_t vocab, T dloss, void* stream) {
  check_sizes("device_cross_entropy_backward", rows, vocab);
  if (rows == 0 || vocab == 0) return;
  const std::int64_t blocks = (rows * vocab + kThreads - 1) / kThreads;
  cross_entropy_backward_kernel<T><<<grid_for(blocks), kThreads, 0,
                                     static_cast<cudaStream_t>(stream)>>>(dlogits, probs, targets,
                                                                          rows, vocab, dloss);
  DTW_CUDA_CHECK(cudaGetLastError());
}

#define DTW_INSTANTIATE(T)                                                                      \
  template T device_cross_entropy_forward<T>(T*, T*, const T*, const std::int32_t*,             \
                                             std::int64_t, std::int64_t, void*);                \
  template void device_cross_entropy_backward<T>(T*, const T*, const std::int32_t*,            \
                                                 std::int64_t, std::int64_t, T, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
