// Device memory for kernels::Vector: the stream-ordered allocator and copies
// on the Place's stream (the Place's device is made current by the caller,
// kernels/src/vector_memory.cpp).
#include <cuda_runtime_api.h>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_memory.h"

namespace dtw::kernels {

void* device_allocate(std::size_t bytes, void* stream) {
  void* p = nullptr;
  DTW_CUDA_CHECK(cudaMallocAsync(&p, bytes, static_cast<cudaStream_t>(stream)));
  return p;
}

void device_free(void* data, void* stream) noexcept {
  if (cudaFreeAsync(data, static_cast<cudaStream_t>(stream)) != cudaSuccess)
    (void)cudaGetLastError();  // a destructor cannot report it; the next checked call would
}

void device_copy(void* dst, const void* src, std::size_t bytes, void* stream, bool sync) {
  auto* s = static_cast<cudaStream_t>(stream);
  // cudaMemcpyDefault: unified addressing tells host from device and one
  // device from another, so one call serves every pair of Places.
  DTW_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  if (sync) DTW_CUDA_CHECK(cudaStreamSynchronize(s));
}

void device_zero(void* data, std::size_t bytes, void* stream) {
  DTW_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, static_cast<cudaStream_t>(stream)));
}

}  // namespace dtw::kernels
