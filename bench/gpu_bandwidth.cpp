// The timing behind bench/gpu_bandwidth.h: CUDA events around back-to-back
// launches on the default stream, after one untimed warm-up call; the median
// of several such batches.
#include "gpu_bandwidth.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

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

// Seconds per call of fn: the median of 5 batches of `reps` calls timed
// together (one kernel is too short for the events' resolution at small sizes).
template <class F>
double seconds_per_call(F&& fn, int reps) {
  fn();  // warm-up: first touch and module load stay out of the timing
  cudaEvent_t start = nullptr, stop = nullptr;
  DTW_CUDA_CHECK(cudaEventCreate(&start));
  DTW_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> batches;
  for (int b = 0; b < 5; ++b) {
    DTW_CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < reps; ++i) fn();
    DTW_CUDA_CHECK(cudaEventRecord(stop));
    DTW_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    DTW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    batches.push_back(static_cast<double>(ms) / 1e3 / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::ranges::sort(batches);
  return batches[batches.size() / 2];
}

// Fills `bytes` of device memory with values of `type` that are not zero and
// stay finite and normal however often a timing loop reduces them into each
// other: floats in [0.75, 1.25) (a sum grows by at most ~1.25 per pass, a
// product by at most 1.25 per pass over a few hundred passes), integers in
// {-1, 0, 1}. Zeros would let a kernel that skips work, or the memory system's
// handling of zeros, flatter the figures; the upload is synchronous.
void fill_with_data(void* device, std::size_t bytes, DataType type) {
  std::vector<std::byte> host(bytes);
  visit(type, [&](auto t) {
    using T = typename decltype(t)::type;
    const std::size_t n = bytes / sizeof(T);
    for (std::size_t i = 0; i < n; ++i) {
      T v{};
      if constexpr (std::is_floating_point_v<T>) v = static_cast<T>(0.75 + static_cast<double>(i % 509) / 1018.0);
      else if constexpr (std::is_integral_v<T>) v = static_cast<T>(static_cast<int>(i % 3) - 1);
      else v = static_cast<T>(static_cast<unsigned char>(i * 37 + 11));
      std::memcpy(host.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  DTW_CUDA_CHECK(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice));
  DTW_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

std::vector<DeviceBandwidth> measure_reduce_vs_copy(std::span<const std::int64_t> sizes, DataType type,
                                                    ReduceOp op) {
  std::vector<DeviceBandwidth> out;
  if (sizes.empty()) return out;
  const auto largest = static_cast<std::size_t>(*std::ranges::max_element(sizes));
  DeviceBuffer a(largest), b(largest);
  fill_with_data(a.p, largest, type);
  fill_with_data(b.p, largest, type);
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
