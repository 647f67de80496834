// dtw_bench_gpu: the CUDA reduce_into's achieved bandwidth next to a
// device-to-device cudaMemcpy of the same bytes, for float arrays from 1 MiB to
// 256 MiB (the measurement is gpu_bandwidth.cpp, shared with `dtw bench
// collectives --backend nccl`). Bandwidth counts bytes moved: 3n for the
// reduction, 2n for the copy. The target is >= 85% of the copy at 256 MiB.
// Rows whose 3n bytes fit in the L2 cache (50 MiB on an H100) are marked: they
// measure the cache and the launch, not device memory, and can exceed the
// memory's bandwidth; only the rows past it compare with the datasheet.
// Without a GPU it says so and exits 0, so CI can run it.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "bench_main.h"
#include "dtw/cuda_check.h"
#include "gpu_bandwidth.h"

namespace {

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
  std::vector<std::int64_t> sizes;
  for (std::int64_t bytes = std::int64_t{1} << 20; bytes <= (std::int64_t{256} << 20); bytes *= 4)
    sizes.push_back(bytes);
  const auto rows = dtw::bench::measure_reduce_vs_copy(sizes, dtw::DataType::kFloat32, dtw::ReduceOp::kSum);
  const std::int64_t l2 = prop.l2CacheSize;
  std::printf("# L2 %lld MiB: rows marked 'L2' keep the reduction's 3n bytes in it (cache and launch, not memory)\n",
              static_cast<long long>(l2 >> 20));
  std::printf("%10s %12s %12s %12s %8s\n", "MiB", "reduce_us", "reduce_GB/s", "copy_GB/s", "ratio");
  for (const auto& r : rows)
    std::printf("%10lld %12.1f %12.1f %12.1f %7.1f%%%s\n", static_cast<long long>(r.bytes >> 20),
                r.reduce_seconds * 1e6, r.reduce_gbps(), r.copy_gbps(), 100 * r.ratio(),
                3 * r.bytes <= l2 ? "  L2" : "");
  const double final_ratio = rows.back().ratio();
  std::printf("256 MiB float: reduce_into at %.1f%% of device-to-device copy (target >= 85%%): %s\n",
              100 * final_ratio, final_ratio >= 0.85 ? "met" : "MISSED");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtw_bench_gpu: the CUDA reduce_into's bandwidth next to a device-to-device copy",
               "dtw bench gpu"};
  return dtw::cli::bench_main(app, argc, argv, run);  // dtw's exit statuses (dtw --help)
}
