// Embedding lookup and its gradient on a CUDA device, without atomics on data.
//
// The forward is a gather: one thread per output element. The backward is a
// scatter in which repeated ids add into the same table row, so threads over
// tokens would race (and atomics would add in a different order each run).
// Instead token positions are sorted by id with CUB's stable radix sort, which
// keeps equal ids in token order; then the first position of each run of
// equal ids owns that table row and adds the run's rows in order, starting
// from dtable's value -- the host reference's sequence of additions exactly.
#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "dtw/cuda_check.h"
#include "dtw/errors.h"
#include "dtw/kernels/cuda_embedding.h"
#include "stream_scratch.cuh"

namespace dtw::kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any size; a cap keeps gridDim.x far below its limit.
constexpr std::int64_t kMaxBlocks = 65535;

int blocks_for(std::int64_t work) {
  const std::int64_t wanted = (work + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

template <class T>
__device__ __forceinline__ T quiet_nan();
template <>
__device__ __forceinline__ float quiet_nan<float>() {
  return __int_as_float(0x7fc00000);
}
template <>
__device__ __forceinline__ double quiet_nan<double>() {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// out[e] for e in [0, n·dim): row i = e / dim, column c = e % dim, one thread
// per element in a grid-stride loop (neighbouring threads take neighbouring
// columns: coalesced reads of the table row and writes of the output row).
// Per element: sizeof(T) read from the table, sizeof(T) written (plus one
// read and one add when accumulating); ids are read once per element but hit
// in cache. A bad id gives NaN instead of a read outside the table.
template <class T>
__global__ void forward_kernel(T* __restrict__ out, const std::int32_t* __restrict__ ids,
                               const T* __restrict__ table, std::int64_t total, std::int64_t dim,
                               std::int64_t table_rows, bool accumulate) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < total; e += stride) {
    const std::int64_t i = e / dim;
    const std::int64_t c = e - i * dim;
    const std::int64_t id = ids[i];
    if (id < 0 || id >= table_rows) {
      out[e] = quiet_nan<T>();
      continue;
    }
    const T value = table[id * dim + c];
    out[e] = accumulate ? out[e] + value : value;
  }
}

// pos[i] = i: the values the sort carries along with the ids.
__global__ void iota_kernel(std::int32_t* __restrict__ pos, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    pos[i] = static_cast<std::int32_t>(i);
}

// One thread per (sorted position j, column c), e = j·dim + c, grid-stride.
// Only the thread at the first position of a run of equal ids works: it adds
// dout[pos[k]][c] for the run's k in order (token order: the sort is stable)
// into dtable[id][c]. No two working threads share an element, so no atomics.
// Bytes: each dout element read once, each touched dtable element read and
// written once, the sorted ids and positions read per step; n·dim adds. A
// frequent id serialises its run in one thread per column (correct, slower).
template <class T>
__global__ void backward_kernel(T* __restrict__ dtable, const std::int32_t* __restrict__ sorted_ids,
                                const std::int32_t* __restrict__ sorted_pos,
                                const T* __restrict__ dout, std::int64_t n, std::int64_t dim,
                                std::int64_t table_rows) {
  const std::int64_t total = n * dim;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < total; e += stride) {
    const std::int64_t j = e / dim;
    const std::int64_t c = e - j * dim;
    const std::int32_t id = sorted_ids[j];
    if (j > 0 && sorted_ids[j - 1] == id) continue;   // not the start of a run
    if (id < 0 || id >= table_rows) continue;         // dropped: see cuda_embedding.h
    T* dst = dtable + static_cast<std::int64_t>(id) * dim + c;
    T acc = *dst;
    for (std::int64_t k = j; k < n && sorted_ids[k] == id; ++k)
      acc += dout[static_cast<std::int64_t>(sorted_pos[k]) * dim + c];
    *dst = acc;
  }
}

// Sets *first_bad to the smallest index whose id is outside [0, table_rows).
// An integer atomicMin: the minimum does not depend on the order threads
// arrive in, so the answer is the same every run. 4 bytes read per id.
__global__ void find_bad_id_kernel(const std::int32_t* __restrict__ ids, std::int64_t n,
                                   std::int64_t table_rows, unsigned long long* first_bad) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= table_rows) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

void check_sizes(const char* kernel, std::int64_t n, std::int64_t dim, std::int64_t table_rows) {
  DTW_CHECK_ARG(n >= 0 && dim >= 0 && table_rows >= 0,
                kernel << ": sizes must not be negative (n " << n << ", dim " << dim
                       << ", table_rows " << table_rows << ")");
}

}  // namespace

template <class T>
void device_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                              std::int64_t dim, std::int64_t table_rows, bool accumulate,
                              void* stream) {
  check_sizes("device_embedding_forward", n, dim, table_rows);
  if (n == 0 || dim == 0) return;
  DTW_CHECK_ARG(out && ids && (table || table_rows == 0),
                "device_embedding_forward: a null pointer among out, ids, table for n "
                    << n << ", dim " << dim << ", table_rows " << table_rows);
  const std::int64_t total = n * dim;
  forward_kernel<T><<<blocks_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      out, ids, table, total, dim, table_rows, accumulate);
  DTW_CUDA_CHECK_LAUNCH();
}

template <class T>
void device_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                               std::int64_t dim, std::int64_t table_rows, void* stream) {
  check_sizes("device_embedding_backward", n, dim, table_rows);
  if (n == 0 || dim == 0) return;
  DTW_CHECK_ARG(n <= INT_MAX, "device_embedding_backward: n " << n << " exceeds " << INT_MAX
                                                              << " (positions sort as int32)");
  DTW_CHECK_ARG(ids && dout && (dtable || table_rows == 0),
                "device_embedding_backward: a null pointer among dtable, ids, dout for n "
                    << n << ", dim " << dim << ", table_rows " << table_rows);
  auto* st = static_cast<cudaStream_t>(stream);
  const int items = static_cast<int>(n);
  std::size_t sort_bytes = 0;
  DTW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, ids,
                                                 static_cast<std::int32_t*>(nullptr),
                                                 static_cast<const std::int32_t*>(nullptr),
                                                 static_cast<std::int32_t*>(nullptr), items, 0,
                                                 32, st));
  // One allocation: sorted ids, positions in, positions out, CUB's scratch,
  // each starting on a 256-byte boundary.
  const std::size_t array_bytes = round_up(static_cast<std::size_t>(n) * sizeof(std::int32_t));
  cuda_detail::StreamScratch<unsigned char> scratch(
      static_cast<std::int64_t>(3 * array_bytes + round_up(sort_bytes)), st);
  auto* sorted_ids = reinterpret_cast<std::int32_t*>(scratch.get());
  auto* pos_in = reinterpret_cast<std::int32_t*>(scratch.get() + array_bytes);
  auto* pos_out = reinterpret_cast<std::int32_t*>(scratch.get() + 2 * array_bytes);
  void* sort_scratch = scratch.get() + 3 * array_bytes;

  iota_kernel<<<blocks_for(n), kThreads, 0, st>>>(pos_in, n);
  DTW_CUDA_CHECK_LAUNCH();
  DTW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, ids, sorted_ids, pos_in,
                                                 pos_out, items, 0, 32, st));
  backward_kernel<T><<<blocks_for(n * dim), kThreads, 0, st>>>(dtable, sorted_ids, pos_out, dout,
                                                                n, dim, table_rows);
  DTW_CUDA_CHECK_LAUNCH();
}

void device_embedding_check_ids(const std::int32_t* ids, std::int64_t n, std::int64_t table_rows,
                                const char* what, void* stream) {
  DTW_CHECK_ARG(n >= 0 && table_rows >= 0, what << ": sizes must not be negative (n " << n
                                                << ", table_rows " << table_rows << ")");
  if (n == 0) return;
  DTW_CHECK_ARG(ids, what << ": ids is null for n " << n);
  auto* st = static_cast<cudaStream_t>(stream);
  cuda_detail::StreamScratch<unsigned long long> first_bad(1, st);
  unsigned long long* d_first = first_bad.get();
  DTW_CUDA_CHECK(cudaMemsetAsync(d_first, 0xff, sizeof(unsigned long long), st));  // ULLONG_MAX
  find_bad_id_kernel<<<blocks_for(n), kThreads, 0, st>>>(ids, n, table_rows, d_first);
  DTW_CUDA_CHECK_LAUNCH();
  unsigned long long index = 0;
  DTW_CUDA_CHECK(cudaMemcpyAsync(&index, d_first, sizeof index, cudaMemcpyDeviceToHost, st));
  DTW_CUDA_CHECK(cudaStreamSynchronize(st));
  if (index >= static_cast<unsigned long long>(n)) return;
  std::int32_t id = 0;
  DTW_CUDA_CHECK(cudaMemcpyAsync(&id, ids + index, sizeof id, cudaMemcpyDeviceToHost, st));
  DTW_CUDA_CHECK(cudaStreamSynchronize(st));
  DTW_CHECK_ARG(false, what << ": index " << index << " has id " << id << " outside [0, "
                            << table_rows << ")");
}

#define DTW_INSTANTIATE(T)                                                                     \
  template void device_embedding_forward<T>(T*, const std::int32_t*, const T*, std::int64_t,   \
                                            std::int64_t, std::int64_t, bool, void*);          \
  template void device_embedding_backward<T>(T*, const std::int32_t*, const T*, std::int64_t,  \
                                             std::int64_t, std::int64_t, void*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
