// Fill device memory with one value: a grid-stride loop writing one element per
// thread and step. A value whose bytes are all equal (zero, mostly) takes
// cudaMemsetAsync instead, which needs no kernel.
#include <cstdint>
#include <cstring>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_fill.h"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;

template <class U>
__global__ void fill_kernel(U* __restrict__ data, std::int64_t count, U value) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    data[i] = value;
}

template <class U>
void launch(void* data, std::int64_t count, const void* value, cudaStream_t stream) {
  U v;
  std::memcpy(&v, value, sizeof v);
  int device = 0, sms = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (count + kThreads - 1) / kThreads;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * 8;
  const int grid = static_cast<int>(wanted < cap ? wanted : cap);
  fill_kernel<U><<<grid, kThreads, 0, stream>>>(static_cast<U*>(data), count, v);
  DTW_CUDA_CHECK_LAUNCH();
}

}  // namespace

void device_fill(void* data, std::int64_t count, const void* value, std::size_t elem_bytes,
                 void* stream) {
  DTW_CHECK_ARG(elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8,
                "device_fill: elements of " << elem_bytes << " bytes (1, 2, 4 or 8 supported)");
  DTW_CHECK_ARG(count >= 0, "device_fill: count " << count << " is negative");
  if (count == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  const auto* bytes = static_cast<const unsigned char*>(value);
  bool uniform = true;
  for (std::size_t i = 1; i < elem_bytes; ++i) uniform = uniform && bytes[i] == bytes[0];
  if (uniform) {
    DTW_CUDA_CHECK(cudaMemsetAsync(data, bytes[0], static_cast<std::size_t>(count) * elem_bytes, st));
    return;
  }
  switch (elem_bytes) {
    case 2: return launch<std::uint16_t>(data, count, value, st);
    case 4: return launch<std::uint32_t>(data, count, value, st);
    case 8: return launch<std::uint64_t>(data, count, value, st);
    default: break;
  }
}

}  // namespace dtw::kernels
