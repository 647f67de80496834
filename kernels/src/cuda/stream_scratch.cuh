#pragma once
// Scratch memory for one call of a CUDA kernel family: taken from the
// stream's memory pool (cudaMallocAsync) and returned on the same stream when
// it goes out of scope -- after the work enqueued before, and on every path
// out of the call, a throw included. Every kernel file that needs temporary
// device memory uses this one.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "dtw/cuda_check.h"

namespace dtw::kernels::cuda_detail {

/// `count` elements of T (none when count is 0) on `stream`.
template <class T>
class StreamScratch {
 public:
  StreamScratch(std::int64_t count, cudaStream_t stream) : stream_(stream) {
    if (count > 0)
      DTW_CUDA_CHECK(cudaMallocAsync(&data_, static_cast<std::size_t>(count) * sizeof(T), stream));
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  T* get() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace dtw::kernels::cuda_detail
