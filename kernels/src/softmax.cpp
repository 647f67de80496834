// Row-wise softmax as Kokkos kernels, next to the plain loops they must match.
//
// Subtracting the row maximum first makes every exponent ≤ 0, so no exp can
// overflow and the largest term is exactly 1 (the sum is ≥ 1: no division by
// a rounded-to-zero sum). One Kokkos index per row; each row's max and sums
// are plain loops inside it. The kernels' exps go through vector_exp.h (in
// float a vectorised exp, in double std::exp); the references keep std::exp.
#include "dtw/kernels/softmax.h"

#include <cmath>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "vector_exp.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

constexpr std::int64_t kLanes = 8;

void check_sizes(const char* kernel, std::int64_t rows, std::int64_t cols) {
  DTW_CHECK_ARG(rows >= 0 && cols >= 0, kernel << ": sizes must not be negative (rows " << rows
                                               << ", cols " << cols << ")");
}

}  // namespace

template <class T>
void softmax_forward(T* y, const T* x, std::int64_t rows, std::int64_t cols) {
  check_sizes("softmax_forward", rows, cols);
  if (rows == 0 || cols == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::softmax_forward", host_range(0, rows), [=](std::int64_t r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T max = detail::row_max(xr, cols);
    // y holds the exponentials until the sum is known (y may alias x: each
    // element is read before it is overwritten). The sum is kept in double.
    // In float the exp is vector_exp.h's, which flushes e^(x − max) below
    // ~1.8e-38 to 0: an absolute error that small in a probability.
    const double sum = detail::exp_shifted_sum(yr, xr, max, cols);
    const T inv = static_cast<T>(1.0 / sum);  // one division per row, then multiplies
    for (std::int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  });
}

template <class T>
void softmax_forward_reference(T* y, const T* x, std::int64_t rows, std::int64_t cols) {
  check_sizes("softmax_forward_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    double max = -INFINITY;
    for (std::int64_t c = 0; c < cols; ++c) max = std::fmax(max, static_cast<double>(xr[c]));
    double sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - max);
    // Written after all reads of the row, since y may alias x.
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<T>(std::exp(xr[c] - max) / sum);
  }
}

template <class T>
void softmax_backward(T* dx, const T* y, const T* dy, std::int64_t rows, std::int64_t cols) {
  check_sizes("softmax_backward", rows, cols);
  if (rows == 0 || cols == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::softmax_backward", host_range(0, rows), [=](std::int64_t r) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    // Σ y·dy in double, with kLanes independent partial sums: they pipeline,
    // and a fixed-width inner loop is what the compiler turns into vector code.
    double part[kLanes] = {};
    std::int64_t c = 0;
    for (; c + kLanes <= cols; c += kLanes)
      for (std::int64_t j = 0; j < kLanes; ++j)
        part[j] += static_cast<double>(yr[c + j]) * static_cast<double>(dyr[c + j]);
    double dot = 0;
    for (; c < cols; ++c) dot += static_cast<double>(yr[c]) * static_cast<double>(dyr[c]);
    for (std::int64_t j = 0; j < kLanes; ++j) dot += part[j];
    // The whole row's dot product is known before dx is written: dx may alias dy.
    const T d = static_cast<T>(dot);
    T* dxr = dx + r * cols;
    for (c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - d);
  });
}

template <class T>
void softmax_backward_reference(T* dx, const T* y, const T* dy, std::int64_t rows,
                                std::int64_t cols) {
  check_sizes("softmax_backward_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      dot += static_cast<double>(y[r * cols + c]) * dy[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r * cols + c;
      dx[i] = static_cast<T>(y[i] * (dy[i] - dot));
    }
  }
}

#define DTW_INSTANTIATE(T)                                                               \
  template void softmax_forward<T>(T*, const T*, std::int64_t, std::int64_t);            \
  template void softmax_forward_reference<T>(T*, const T*, std::int64_t, std::int64_t);  \
  template void softmax_backward<T>(T*, const T*, const T*, std::int64_t, std::int64_t); \
  template void softmax_backward_reference<T>(T*, const T*, const T*, std::int64_t, std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
