// divide in place on a CUDA device: what ReduceOp::kAvg adds to a sum. One read
// and one write per element through a grid-stride loop; the division is the same
// expression as the host loop in Comm::do_divide_local, so both round alike.
#include <cstdint>
#include <type_traits>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void divide_kernel(T* __restrict__ data, std::int64_t count, T divisor) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    data[i] = static_cast<T>(data[i] / divisor);
}

template <class T>
void launch(void* data, std::int64_t count, int divisor, cudaStream_t stream) {
  int device = 0, sms = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (count + kThreads - 1) / kThreads;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * 8;
  const int grid = static_cast<int>(wanted < cap ? wanted : cap);
  divide_kernel<T>
      <<<grid, kThreads, 0, stream>>>(static_cast<T*>(data), count, static_cast<T>(divisor));
  DTW_CUDA_CHECK_LAUNCH();
}

}  // namespace

void device_divide(Buffer data, int divisor, void* stream) {
  DTW_CHECK_ARG(divisor > 0, "device_divide: divisor " << divisor << " is not positive");
  DTW_CHECK_ARG(data.count >= 0, "device_divide: count " << data.count << " is negative");
  if (data.count == 0 || divisor == 1) return;
  DTW_CHECK_ARG(data.data != nullptr, "device_divide: null pointer with count " << data.count);
  auto* st = static_cast<cudaStream_t>(stream);
  DTW_CHECK_ARG(data.type != DataType::kByte, "device_divide: raw bytes cannot be divided");
  visit(data.type, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (!std::is_same_v<T, std::byte>) launch<T>(data.data, data.count, divisor, st);
  });
}

}  // namespace dtw::kernels
