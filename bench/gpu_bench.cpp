// dtw_bench_gpu: the CUDA reduce_into's achieved bandwidth next to a
// device-to-device cudaMemcpy of the same bytes, for float arrays from 1 MiB to
// 256 MiB. Bandwidth counts bytes moved: the reduction reads two arrays and
// writes one (3n), the copy reads one and writes one (2n). The target is >= 85%
// of the copy at 256 MiB. Without a GPU it says so and exits 0, so CI can run it.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"

namespace {

template <class F>
double seconds_per_call(F&& fn, int reps) {
  fn();  // warm-up: first-touch and module load stay out of the timing
  cudaEvent_t start, stop;
  DTW_CUDA_CHECK(cudaEventCreate(&start));
  DTW_CUDA_CHECK(cudaEventCreate(&stop));
  DTW_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) fn();
  DTW_CUDA_CHECK(cudaEventRecord(stop));
  DTW_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  DTW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / reps;
}

int run() {
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): nothing to measure\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0");
    return 0;
  }
  cudaDeviceProp prop{};
  DTW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  std::printf("%10s %12s %12s %12s %8s\n", "MiB", "reduce_us", "reduce_GB/s", "copy_GB/s", "ratio");
  constexpr std::size_t kMaxBytes = std::size_t{256} << 20;
  void *va = nullptr, *vb = nullptr;
  DTW_CUDA_CHECK(cudaMalloc(&va, kMaxBytes));
  DTW_CUDA_CHECK(cudaMalloc(&vb, kMaxBytes));
  auto* a = static_cast<float*>(va);
  auto* b = static_cast<float*>(vb);
  DTW_CUDA_CHECK(cudaMemset(a, 0, kMaxBytes));
  DTW_CUDA_CHECK(cudaMemset(b, 0, kMaxBytes));
  double final_ratio = 0;
  for (std::size_t bytes = std::size_t{1} << 20; bytes <= kMaxBytes; bytes *= 4) {
    const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
    const int reps = bytes >= (std::size_t{64} << 20) ? 20 : 100;
    const double t_reduce = seconds_per_call(
        [&] { dtw::kernels::device_reduce_into(a, b, n, dtw::ReduceOp::kSum); }, reps);
    const double t_copy = seconds_per_call(
        [&] { DTW_CUDA_CHECK(cudaMemcpyAsync(a, b, bytes, cudaMemcpyDeviceToDevice)); }, reps);
    const double reduce_bw = 3.0 * static_cast<double>(bytes) / t_reduce;
    const double copy_bw = 2.0 * static_cast<double>(bytes) / t_copy;
    final_ratio = reduce_bw / copy_bw;
    std::printf("%10zu %12.1f %12.1f %12.1f %7.1f%%\n", bytes >> 20, t_reduce * 1e6, reduce_bw / 1e9,
                copy_bw / 1e9, 100 * final_ratio);
  }
  cudaFree(a);
  cudaFree(b);
  std::printf("256 MiB float: reduce_into at %.1f%% of device-to-device copy (target >= 85%%): %s\n",
              100 * final_ratio, final_ratio >= 0.85 ? "met" : "MISSED");
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtw_bench_gpu: %s\n", e.what());
    return 1;
  }
}
