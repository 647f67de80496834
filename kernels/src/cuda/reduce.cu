// reduce_into on a CUDA device. Memory-bound: each element is read twice and
// written once, so the kernel's only job is to keep the memory system busy --
// 16-byte vector loads and stores where both pointers allow it, a grid-stride
// loop sized to the GPU, and scalar loops for the misaligned head and the tail.
#include <cstdint>
#include <type_traits>
#include <cstring>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;
constexpr std::uintptr_t kVecBytes = 16;

template <ReduceOp kOp, class T>
__device__ __forceinline__ T apply(T a, T b) {
  if constexpr (kOp == ReduceOp::kProd) return a * b;
  else if constexpr (kOp == ReduceOp::kMin) return b < a ? b : a;
  else if constexpr (kOp == ReduceOp::kMax) return a < b ? b : a;
  else return a + b;
}

// Elements [0, head) and [head + nvec * kPer, count) go one by one; the nvec
// vectors in between go 16 bytes at a time (dst + head and src + head are
// 16-byte aligned whenever nvec > 0).
template <class T, ReduceOp kOp>
__global__ void reduce_kernel(T* __restrict__ dst, const T* __restrict__ src, std::int64_t head,
                              std::int64_t nvec, std::int64_t count) {
  constexpr int kPer = static_cast<int>(kVecBytes / sizeof(T));
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  auto* vdst = reinterpret_cast<uint4*>(dst + head);
  const auto* vsrc = reinterpret_cast<const uint4*>(src + head);
  for (std::int64_t i = tid; i < nvec; i += stride) {
    const uint4 a4 = vdst[i];
    const uint4 b4 = vsrc[i];
    T a[kPer], b[kPer];
    memcpy(a, &a4, sizeof(a4));  // register moves, not memory traffic
    memcpy(b, &b4, sizeof(b4));
#pragma unroll
    for (int k = 0; k < kPer; ++k) a[k] = apply<kOp>(a[k], b[k]);
    uint4 out;
    memcpy(&out, a, sizeof(out));
    vdst[i] = out;
  }
  if (tid < head) dst[tid] = apply<kOp>(dst[tid], src[tid]);
  for (std::int64_t i = head + nvec * kPer + tid; i < count; i += stride)
    dst[i] = apply<kOp>(dst[i], src[i]);
}

// Enough blocks to fill every SM a few times over; the grid-stride loop does the rest.
int grid_for(std::int64_t work) {
  int device = 0, sms = 0;
  DTW_CUDA_CHECK(cudaGetDevice(&device));
  DTW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (work + kThreads - 1) / kThreads;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * 8;
  return static_cast<int>(wanted < cap ? (wanted > 0 ? wanted : 1) : cap);
}

template <class T, ReduceOp kOp>
void launch(T* dst, const T* src, std::int64_t count, cudaStream_t stream) {
  constexpr std::int64_t kPer = static_cast<std::int64_t>(kVecBytes / sizeof(T));
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  std::int64_t head = 0, nvec = 0;
  // Vectorise only when dst and src share their offset within 16 bytes: then
  // a few scalar elements bring both to a 16-byte boundary at once.
  if (d % kVecBytes == s % kVecBytes && d % sizeof(T) == 0) {
    head = static_cast<std::int64_t>(((kVecBytes - d % kVecBytes) % kVecBytes) / sizeof(T));
    if (head > count) head = count;
    nvec = (count - head) / kPer;
    if (nvec == 0) head = 0;
  }
  const std::int64_t scalar = count - nvec * kPer;
  const std::int64_t work = nvec > scalar ? nvec : scalar;
  reduce_kernel<T, kOp><<<grid_for(work), kThreads, 0, stream>>>(dst, src, head, nvec, count);
  DTW_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void device_reduce_into(T* dst, const T* src, std::int64_t count, ReduceOp op, void* stream) {
  DTW_CHECK_ARG(count >= 0, "device_reduce_into: count " << count << " is negative");
  if (count == 0) return;
  DTW_CHECK_ARG(dst != nullptr && src != nullptr,
                "device_reduce_into: null pointer with count " << count);
  auto* st = static_cast<cudaStream_t>(stream);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return launch<T, ReduceOp::kSum>(dst, src, count, st);
    case ReduceOp::kProd: return launch<T, ReduceOp::kProd>(dst, src, count, st);
    case ReduceOp::kMin: return launch<T, ReduceOp::kMin>(dst, src, count, st);
    case ReduceOp::kMax: return launch<T, ReduceOp::kMax>(dst, src, count, st);
  }
  DTW_CHECK_ARG(false, "device_reduce_into: unknown op " << static_cast<int>(op));
}

void device_reduce_into(Buffer dst, ConstBuffer src, ReduceOp op, void* stream) {
  DTW_CHECK_ARG(dst.type == src.type, "device_reduce_into: destination holds "
                                          << name_of(dst.type) << " but source holds "
                                          << name_of(src.type));
  DTW_CHECK_ARG(dst.count == src.count, "device_reduce_into: destination has "
                                            << dst.count << " elements but source has "
                                            << src.count);
  DTW_CHECK_ARG(dst.type != DataType::kByte, "device_reduce_into: raw bytes cannot be reduced");
  visit(dst.type, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (!std::is_same_v<T, std::byte>)
      device_reduce_into(static_cast<T*>(dst.data), static_cast<const T*>(src.data), dst.count, op,
                         stream);
  });
}

template void device_reduce_into<std::int32_t>(std::int32_t*, const std::int32_t*, std::int64_t,
                                               ReduceOp, void*);
template void device_reduce_into<std::int64_t>(std::int64_t*, const std::int64_t*, std::int64_t,
                                               ReduceOp, void*);
template void device_reduce_into<float>(float*, const float*, std::int64_t, ReduceOp, void*);
template void device_reduce_into<double>(double*, const double*, std::int64_t, ReduceOp, void*);

}  // namespace dtw::kernels
