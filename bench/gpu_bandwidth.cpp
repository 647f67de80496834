// The timing behind bench/gpu_bandwidth.h: CUDA events around back-to-back
// launches on the default stream, after one untimed warm-up call.
#include "gpu_bandwidth.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"

namespace dtw::bench {
namespace {

// Device memory that frees itself, so a failed CUDA call leaks nothing.
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) { DTW_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* p = nullptr;
};

// Seconds per call of fn, over `reps` calls timed together: one kernel is
// too short for the events' resolution at small sizes.
template <class F>
double seconds_per_call(F&& fn, int reps) {
  fn();  // warm-up: first touch and module load stay out of the timing
  cudaEvent_t start = nullptr, stop = nullptr;
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
  return static_cast<double>(ms) / 1e3 / reps;
}

}  // namespace

std::vector<DeviceBandwidth> measure_reduce_vs_copy(std::span<const std::int64_t> sizes, DataType type,
                                                    ReduceOp op) {
  std::vector<DeviceBandwidth> out;
  if (sizes.empty()) return out;
  const auto largest = static_cast<std::size_t>(*std::ranges::max_element(sizes));
  DeviceBuffer a(largest), b(largest);
  // Zeros: repeated sums stay zero, so no pass runs into denormals or overflow.
  DTW_CUDA_CHECK(cudaMemset(a.p, 0, largest));
  DTW_CUDA_CHECK(cudaMemset(b.p, 0, largest));
  const auto elem = static_cast<std::int64_t>(size_of(type));
  for (const std::int64_t bytes : sizes) {
    const std::int64_t n = bytes / elem;
    // Large arrays take milliseconds per pass; small ones need many passes.
    const int reps = bytes >= (std::int64_t{64} << 20) ? 20 : 100;
    DeviceBandwidth row;
    row.bytes = n * elem;
    row.reduce_seconds = seconds_per_call(
        [&] { kernels::device_reduce_into(Buffer{a.p, n, type}, ConstBuffer{b.p, n, type}, op); }, reps);
    row.copy_seconds = seconds_per_call(
        [&] {
          DTW_CUDA_CHECK(cudaMemcpyAsync(a.p, b.p, static_cast<std::size_t>(row.bytes), cudaMemcpyDeviceToDevice));
        },
        reps);
    out.push_back(row);
  }
  return out;
}

}  // namespace dtw::bench
