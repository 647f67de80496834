#pragma once
// What every GPU test needs: a skip when the machine has too few CUDA devices
// (CI machines have the toolkit but no GPU), and device memory that frees
// itself. Copies between host and device are explicit, so a test never reads
// device memory from the host by accident.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <span>
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

/// Why a test that needs `needed` GPUs cannot run on a machine with `have`
/// (`why`: what cudaGetDeviceCount said); empty when it can. With one GPU the
/// multi-rank tests skip: the nccl backend puts each rank on a GPU of its own,
/// so nothing between two GPUs (chapter code against NCCL's collectives) can
/// run there, and the message says so rather than looking like a pass.
inline std::string gpu_shortfall(int have, int needed, const std::string& why) {
  if (have <= 0) return "no CUDA device: " + why;
  if (have >= needed) return "";
  return "needs " + std::to_string(needed) + " CUDA devices, this machine has " + std::to_string(have) +
         ": the nccl backend runs one rank per GPU, so this check of " + std::to_string(needed) +
         " or more ranks did not run (it proves nothing about this machine)";
}

/// Skips the current test unless at least `needed` CUDA devices are present.
#define DTW_REQUIRE_GPUS(needed)                                                                   \
  do {                                                                                             \
    std::string dtw_why_;                                                                          \
    const int dtw_have_ = ::dtw::testing::cuda_devices(&dtw_why_);                                 \
    const std::string dtw_short_ = ::dtw::testing::gpu_shortfall(dtw_have_, (needed), dtw_why_);   \
    if (!dtw_short_.empty()) GTEST_SKIP() << dtw_short_;                                           \
  } while (0)

/// Prints, once per test program, how many GPUs the machine has and what the
/// program can therefore not check, so a log of skips never reads as passes.
class GpuCountBanner : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    const int have = cuda_devices(&why);
    if (have == 0) {
      std::printf("[ dtw gpu  ] no CUDA device (%s): every GPU test skips\n", why.c_str());
    } else {
      cudaDeviceProp prop{};
      const bool named = cudaGetDeviceProperties(&prop, 0) == cudaSuccess;
      std::printf("[ dtw gpu  ] %d CUDA device(s), device 0: %s%s\n", have, named ? prop.name : "?",
                  have == 1 ? "; tests of 2 or more ranks on the nccl backend skip (one rank per GPU)"
                            : "");
    }
    std::fflush(stdout);
  }
};
inline ::testing::Environment* const kGpuCountBanner =
    ::testing::AddGlobalTestEnvironment(new GpuCountBanner);

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
    // cudaMemcpy from pageable memory may return before the data reaches the
    // device, and the nccl backend works on a non-blocking stream, which does
    // not wait for the legacy stream this copy ran on: wait, or the next
    // collective may read the buffer's old contents. Only a device shows it.
    DTW_CUDA_CHECK(cudaStreamSynchronize(nullptr));
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

/// `host`'s values in a new DeviceArray (plain device memory), uploaded and waited for.
template <class T>
DeviceArray<T> to_device(const std::vector<T>& host) {
  DeviceArray<T> d(host.size());
  if (!host.empty()) d.upload(host);
  return d;
}

/// A non-blocking CUDA stream of its own (as a rank's), destroyed with the test.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { DTW_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s); }
};

}  // namespace dtw::testing
