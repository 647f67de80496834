#pragma once
// What every GPU test needs: a skip when the machine has too few CUDA devices
// (CI machines have the toolkit but no GPU), and device memory that frees
// itself. Copies between host and device are explicit, so a test never reads
// device memory from the host by accident.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "dtw/cuda_check.h"

namespace dtw::testing {

/// Number of usable CUDA devices; `why` says what cudaGetDeviceCount reported when 0.
inline int cuda_devices(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  if (why) *why = "cudaGetDeviceCount found " + std::to_string(n) + " device(s)";
  return n;
}

/// Skips the current test unless at least `needed` CUDA devices are present.
#define DTW_REQUIRE_GPUS(needed)                                                          \
  do {                                                                                    \
    std::string dtw_why_;                                                                 \
    const int dtw_have_ = ::dtw::testing::cuda_devices(&dtw_why_);                        \
    if (dtw_have_ == 0) GTEST_SKIP() << "no CUDA device: " << dtw_why_;                   \
    if (dtw_have_ < (needed))                                                             \
      GTEST_SKIP() << "needs " << (needed) << " CUDA devices, this machine has " << dtw_have_; \
  } while (0)

/// `count` elements of T in device memory (managed when `managed`: readable from
/// the host too, which the chapter code's host-side copies need).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count, bool managed = false) : count_(count) {
    const std::size_t bytes = count == 0 ? 1 : count * sizeof(T);
    if (managed) DTW_CUDA_CHECK(cudaMallocManaged(&data_, bytes));
    else DTW_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
  }
  DeviceArray& operator=(DeviceArray&&) = delete;
  ~DeviceArray() {
    if (data_) cudaFree(data_);
  }
  T* data() const { return static_cast<T*>(data_); }
  std::size_t size() const { return count_; }
  std::span<T> span() const { return {data(), count_}; }
  void upload(const std::vector<T>& host) {
    DTW_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    DTW_CUDA_CHECK(cudaDeviceSynchronize());
    DTW_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t count_;
};

}  // namespace dtw::testing
