// The head permutes, a copy and a fill on a CUDA device, matching permute.cpp
// bit for bit (nothing is rounded). A permute is one thread per element of
// the [batch·seq, heads·head_dim] side in a grid-stride loop: neighbouring
// threads take neighbouring columns, so that side is read or written
// coalesced and the per-head side in head_dim-long runs. Per element: one
// read and one write of T (three of each for q, k, v), a few integer divides.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/cuda_fill.h"
#include "dtw/kernels/cuda_permute.h"
#include "../layout_checks.h"

namespace dtw::kernels {
namespace {

using detail::check_count;
using detail::check_dims;

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;  // grid-stride loops cover the rest

int blocks_for(std::int64_t work) {
  const std::int64_t wanted = (work + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

// Element e = row·width + h·D + d of the [rows, heads·D] side; returns the
// offset of the same value in the per-head layout [batch, heads, seq, D].
struct Index {
  std::int64_t seq, heads, head_dim;
  __device__ std::int64_t per_head(std::int64_t row, std::int64_t col) const {
    const std::int64_t b = row / seq, t = row - b * seq;
    const std::int64_t h = col / head_dim, d = col - h * head_dim;
    return ((b * heads + h) * seq + t) * head_dim + d;
  }
};

// kToHeads: rows → per-head (split); otherwise per-head → rows (merge).
// `parts` matrices side by side in each row (3 for qkv, 1 otherwise).
template <class T, bool kToHeads>
__global__ void permute_kernel(T* __restrict__ rows_side, T* __restrict__ a, T* __restrict__ b,
                               T* __restrict__ c, std::int64_t total, std::int64_t width, int parts,
                               Index index) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const std::int64_t row = e / width, col = e - row * width;
    const std::int64_t p = index.per_head(row, col);
    T* r = rows_side + row * parts * width + col;
    T* heads[3] = {a, b, c};
    for (int k = 0; k < parts; ++k) {
      if (kToHeads) heads[k][p] = r[k * width];
      else r[k * width] = heads[k][p];
    }
  }
}

template <class T, bool kToHeads>
void launch(const char* kernel, T* rows_side, T* a, T* b, T* c, int parts, std::int64_t batch,
            std::int64_t seq, std::int64_t heads, std::int64_t head_dim, void* stream) {
  check_dims(kernel, batch, seq, heads, head_dim);
  const std::int64_t width = heads * head_dim, total = batch * seq * width;
  if (total == 0) return;
  permute_kernel<T, kToHeads>
      <<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          rows_side, a, b, c, total, width, parts, Index{seq, heads, head_dim});
  DTW_CUDA_CHECK_LAUNCH();
}

}  // namespace

// The const_casts only let one kernel serve both directions: a side is
// written only when it is the destination.
template <class T>
void device_split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
                      std::int64_t heads, std::int64_t head_dim, void* stream) {
  launch<T, true>("device_split_qkv", const_cast<T*>(qkv), q, k, v, 3, batch, seq, heads, head_dim,
                  stream);
}
template <class T>
void device_join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
                     std::int64_t seq, std::int64_t heads, std::int64_t head_dim, void* stream) {
  launch<T, false>("device_join_qkv", qkv, const_cast<T*>(q), const_cast<T*>(k), const_cast<T*>(v),
                   3, batch, seq, heads, head_dim, stream);
}
template <class T>
void device_merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim, void* stream) {
  launch<T, false>("device_merge_heads", x, const_cast<T*>(per_head), nullptr, nullptr, 1, batch,
                   seq, heads, head_dim, stream);
}
template <class T>
void device_split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim, void* stream) {
  launch<T, true>("device_split_heads", const_cast<T*>(x), per_head, nullptr, nullptr, 1, batch,
                  seq, heads, head_dim, stream);
}

template <class T>
void device_copy_values(T* dst, const T* src, std::int64_t n, void* stream) {
  check_count("device_copy_values", n);
  if (n == 0 || dst == src) return;
  DTW_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(T),
                                 cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

template <class T>
void device_fill_values(T* dst, std::int64_t n, T value, void* stream) {
  check_count("device_fill_values", n);
  device_fill(dst, n, &value, sizeof(T), stream);
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void device_split_qkv<T>(T*, T*, T*, const T*, std::int64_t, std::int64_t,            \
                                    std::int64_t, std::int64_t, void*);                          \
  template void device_join_qkv<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t, \
                                   std::int64_t, std::int64_t, void*);                           \
  template void device_merge_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,    \
                                      std::int64_t, void*);                                      \
  template void device_split_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,    \
                                      std::int64_t, void*);                                      \
  template void device_copy_values<T>(T*, const T*, std::int64_t, void*);                        \
  template void device_fill_values<T>(T*, std::int64_t, T, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
