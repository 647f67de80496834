// Embedding lookup as Kokkos kernels, next to the plain loops they must match.
//
// Forward copies one table row per id: one Kokkos index per output row.
// Backward scatters rows back, and repeated ids add into the same table row,
// so indices over ids would race. Instead each Kokkos index owns a strip of
// columns of the whole table and walks the ids in order: no two indices touch
// the same element, and every element sums its contributions in id order,
// exactly as the sequential reference does.
#include "dtw/kernels/embedding.h"

#include <algorithm>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

constexpr std::int64_t kColumnStrip = 128;

// All checks before any kernel runs: an exception must not leave a parallel region.
void check_args(const char* kernel, const std::int32_t* ids, std::int64_t n, std::int64_t dim,
                std::int64_t table_rows) {
  DTW_CHECK_ARG(n >= 0 && dim >= 0 && table_rows >= 0,
                kernel << ": sizes must not be negative (n " << n << ", dim " << dim
                       << ", table_rows " << table_rows << ")");
  for (std::int64_t i = 0; i < n; ++i) {
    DTW_CHECK_ARG(ids[i] >= 0 && ids[i] < table_rows, kernel << ": index " << i << " has id "
                                                             << ids[i] << " outside [0, "
                                                             << table_rows << ")");
  }
}

}  // namespace

template <class T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                       std::int64_t dim, std::int64_t table_rows, bool accumulate) {
  check_args("embedding_forward", ids, n, dim, table_rows);
  if (n == 0 || dim == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::embedding_forward", host_range(0, n), [=](std::int64_t i) {
    const T* __restrict__ src = table + static_cast<std::int64_t>(ids[i]) * dim;
    T* __restrict__ dst = out + i * dim;
    if (accumulate) {
      for (std::int64_t c = 0; c < dim; ++c) dst[c] += src[c];
    } else {
      for (std::int64_t c = 0; c < dim; ++c) dst[c] = src[c];
    }
  });
}

template <class T>
void embedding_forward_reference(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                                 std::int64_t dim, std::int64_t table_rows, bool accumulate) {
  check_args("embedding_forward_reference", ids, n, dim, table_rows);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t c = 0; c < dim; ++c) {
      const T value = table[ids[i] * dim + c];
      out[i * dim + c] = accumulate ? out[i * dim + c] + value : value;
    }
  }
}

template <class T>
void embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                        std::int64_t dim, std::int64_t table_rows) {
  check_args("embedding_backward", ids, n, dim, table_rows);
  if (n == 0 || dim == 0) return;
  ensure_kokkos_initialized();
  const std::int64_t strips = (dim + kColumnStrip - 1) / kColumnStrip;
  Kokkos::parallel_for("dtw::embedding_backward", host_range(0, strips), [=](std::int64_t s) {
    const std::int64_t begin = s * kColumnStrip;
    const std::int64_t width = std::min(kColumnStrip, dim - begin);
    for (std::int64_t i = 0; i < n; ++i) {
      T* __restrict__ dst = dtable + static_cast<std::int64_t>(ids[i]) * dim + begin;
      const T* __restrict__ src = dout + i * dim + begin;
      for (std::int64_t c = 0; c < width; ++c) dst[c] += src[c];
    }
  });
}

template <class T>
void embedding_backward_reference(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                                  std::int64_t dim, std::int64_t table_rows) {
  check_args("embedding_backward_reference", ids, n, dim, table_rows);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < dim; ++c) dtable[ids[i] * dim + c] += dout[i * dim + c];
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void embedding_forward<T>(T*, const std::int32_t*, const T*, std::int64_t,            \
                                     std::int64_t, std::int64_t, bool);                          \
  template void embedding_forward_reference<T>(T*, const std::int32_t*, const T*, std::int64_t,  \
                                               std::int64_t, std::int64_t, bool);                \
  template void embedding_backward<T>(T*, const std::int32_t*, const T*, std::int64_t,           \
                                      std::int64_t, std::int64_t);                               \
  template void embedding_backward_reference<T>(T*, const std::int32_t*, const T*, std::int64_t, \
                                                std::int64_t, std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
