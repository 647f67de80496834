// The vocabulary slice's embedding and cross-entropy pieces as Kokkos kernels,
// next to the plain loops they must match bit for bit: every value is the
// same sequence of operations in T as the loop's (sums in column order, the
// loss's total in row order), only rows run side by side. The backward of
// the lookup takes embedding.cpp's scheme: each Kokkos index owns a strip of
// columns of the whole table and walks the tokens in order, so repeated ids
// add in token order and no two indices touch one element.
#include "dtw/kernels/vocab_slice.h"

#include <algorithm>
#include <cmath>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "layout_checks.h"

namespace dtw::kernels {
namespace {

using detail::check_lookup;
using detail::check_rows;

using detail::host_range;

constexpr std::int64_t kColumnStrip = 128;

// The local row of id in [v0, v1), or −1.
inline std::int64_t local_row(std::int32_t id, std::int64_t v0, std::int64_t v1) {
  return id >= v0 && id < v1 ? id - v0 : -1;
}

// The loop every piece shares: the row maximum as std::max_element finds it.
template <class T>
T first_max(const T* row, std::int64_t cols) {
  return *std::max_element(row, row + cols);
}

}  // namespace

template <class T>
void vocab_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                             std::int64_t dim, std::int64_t v0, std::int64_t v1) {
  check_lookup("vocab_embedding_forward", n, dim, v0, v1);
  if (n == 0 || dim == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::vocab_embedding_forward", host_range(0, n), [=](std::int64_t i) {
    const std::int64_t r = local_row(ids[i], v0, v1);
    if (r < 0) std::fill_n(out + i * dim, dim, T(0));
    else std::copy_n(table + r * dim, dim, out + i * dim);
  });
}

template <class T>
void vocab_embedding_forward_reference(T* out, const std::int32_t* ids, const T* table,
                                       std::int64_t n, std::int64_t dim, std::int64_t v0,
                                       std::int64_t v1) {
  check_lookup("vocab_embedding_forward_reference", n, dim, v0, v1);
  for (std::int64_t i = 0; i < n; ++i) {
    const bool held = ids[i] >= v0 && ids[i] < v1;
    for (std::int64_t c = 0; c < dim; ++c)
      out[i * dim + c] = held ? table[(ids[i] - v0) * dim + c] : T(0);
  }
}

template <class T>
void vocab_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                              std::int64_t dim, std::int64_t v0, std::int64_t v1) {
  check_lookup("vocab_embedding_backward", n, dim, v0, v1);
  if (n == 0 || dim == 0 || v1 == v0) return;
  ensure_kokkos_initialized();
  const std::int64_t strips = (dim + kColumnStrip - 1) / kColumnStrip;
  Kokkos::parallel_for("dtw::vocab_embedding_backward", host_range(0, strips), [=](std::int64_t s) {
    const std::int64_t begin = s * kColumnStrip, width = std::min(kColumnStrip, dim - begin);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = local_row(ids[i], v0, v1);
      if (r < 0) continue;
      T* __restrict__ dst = dtable + r * dim + begin;
      const T* __restrict__ src = dout + i * dim + begin;
      for (std::int64_t c = 0; c < width; ++c) dst[c] += src[c];
    }
  });
}

template <class T>
void vocab_embedding_backward_reference(T* dtable, const std::int32_t* ids, const T* dout,
                                        std::int64_t n, std::int64_t dim, std::int64_t v0,
                                        std::int64_t v1) {
  check_lookup("vocab_embedding_backward_reference", n, dim, v0, v1);
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[i] >= v0 && ids[i] < v1)
      for (std::int64_t c = 0; c < dim; ++c) dtable[(ids[i] - v0) * dim + c] += dout[i * dim + c];
}

template <class T>
void vocab_row_max(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols) {
  check_rows("vocab_row_max", rows, cols);
  if (rows == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::vocab_row_max", host_range(0, rows),
                       [=](std::int64_t r) { row_max[r] = first_max(logits + r * cols, cols); });
}

template <class T>
void vocab_row_max_reference(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols) {
  check_rows("vocab_row_max_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    T best = logits[r * cols];
    for (std::int64_t c = 1; c < cols; ++c)
      if (best < logits[r * cols + c]) best = logits[r * cols + c];
    row_max[r] = best;
  }
}

template <class T>
void vocab_exp_sums(T* sums, const T* logits, const T* row_max, const std::int32_t* targets,
                    std::int64_t rows, std::int64_t cols, std::int64_t v0) {
  check_rows("vocab_exp_sums", rows, cols);
  if (rows == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::vocab_exp_sums", host_range(0, rows), [=](std::int64_t r) {
    const T* lr = logits + r * cols;
    T sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(lr[c] - row_max[r]);
    sums[r] = sum;
    const std::int64_t t = local_row(targets[r], v0, v0 + cols);
    sums[rows + r] = t < 0 ? T(0) : lr[t];
  });
}

template <class T>
void vocab_exp_sums_reference(T* sums, const T* logits, const T* row_max,
                              const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                              std::int64_t v0) {
  check_rows("vocab_exp_sums_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(logits[r * cols + c] - row_max[r]);
    sums[r] = sum;
    const bool held = targets[r] >= v0 && targets[r] < v0 + cols;
    sums[rows + r] = held ? logits[r * cols + (targets[r] - v0)] : T(0);
  }
}

template <class T>
T vocab_cross_entropy(T* probs, T* losses, const T* logits, const T* row_max, const T* sums,
                      std::int64_t rows, std::int64_t cols) {
  check_rows("vocab_cross_entropy", rows, cols);
  if (rows == 0) return T(0);
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::vocab_cross_entropy", host_range(0, rows), [=](std::int64_t r) {
    losses[r] = std::log(sums[r]) + row_max[r] - sums[rows + r];
    for (std::int64_t c = 0; c < cols; ++c)
      probs[r * cols + c] = std::exp(logits[r * cols + c] - row_max[r]) / sums[r];
  });
  // The mean in T, in row order: the same on every call.
  T total = 0;
  for (std::int64_t r = 0; r < rows; ++r) total += losses[r];
  return total / static_cast<T>(rows);
}

template <class T>
T vocab_cross_entropy_reference(T* probs, T* losses, const T* logits, const T* row_max,
                                const T* sums, std::int64_t rows, std::int64_t cols) {
  check_rows("vocab_cross_entropy_reference", rows, cols);
  T total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    losses[r] = std::log(sums[r]) + row_max[r] - sums[rows + r];
    total += losses[r];
    for (std::int64_t c = 0; c < cols; ++c)
      probs[r * cols + c] = std::exp(logits[r * cols + c] - row_max[r]) / sums[r];
  }
  return rows == 0 ? T(0) : total / static_cast<T>(rows);
}

template <class T>
void vocab_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t cols, std::int64_t v0, T dloss) {
  check_rows("vocab_cross_entropy_backward", rows, cols);
  if (rows == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::vocab_cross_entropy_backward", host_range(0, rows),
                       [=](std::int64_t r) {
                         for (std::int64_t c = 0; c < cols; ++c)
                           dlogits[r * cols + c] = dloss * probs[r * cols + c];
                         // The one-hot lands only on the slice holding the target.
                         const std::int64_t t = local_row(targets[r], v0, v0 + cols);
                         if (t >= 0) dlogits[r * cols + t] -= dloss;
                       });
}

template <class T>
void vocab_cross_entropy_backward_reference(T* dlogits, const T* probs, const std::int32_t* targets,
                                            std::int64_t rows, std::int64_t cols, std::int64_t v0,
                                            T dloss) {
  check_rows("vocab_cross_entropy_backward_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const T scaled = dloss * probs[r * cols + c];
      dlogits[r * cols + c] = targets[r] - v0 == c ? scaled - dloss : scaled;
    }
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void vocab_embedding_forward<T>(T*, const std::int32_t*, const T*, std::int64_t,       \
                                           std::int64_t, std::int64_t, std::int64_t);             \
  template void vocab_embedding_forward_reference<T>(                                             \
      T*, const std::int32_t*, const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t); \
  template void vocab_embedding_backward<T>(T*, const std::int32_t*, const T*, std::int64_t,      \
                                            std::int64_t, std::int64_t, std::int64_t);            \
  template void vocab_embedding_backward_reference<T>(                                            \
      T*, const std::int32_t*, const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t); \
  template void vocab_row_max<T>(T*, const T*, std::int64_t, std::int64_t);                       \
  template void vocab_row_max_reference<T>(T*, const T*, std::int64_t, std::int64_t);             \
  template void vocab_exp_sums<T>(T*, const T*, const T*, const std::int32_t*, std::int64_t,      \
                                  std::int64_t, std::int64_t);                                    \
  template void vocab_exp_sums_reference<T>(T*, const T*, const T*, const std::int32_t*,          \
                                            std::int64_t, std::int64_t, std::int64_t);            \
  template T vocab_cross_entropy<T>(T*, T*, const T*, const T*, const T*, std::int64_t,           \
                                    std::int64_t);                                                \
  template T vocab_cross_entropy_reference<T>(T*, T*, const T*, const T*, const T*, std::int64_t, \
                                              std::int64_t);                                      \
  template void vocab_cross_entropy_backward<T>(T*, const T*, const std::int32_t*, std::int64_t,  \
                                                std::int64_t, std::int64_t, T);                   \
  template void vocab_cross_entropy_backward_reference<T>(                                        \
      T*, const T*, const std::int32_t*, std::int64_t, std::int64_t, std::int64_t, T);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
