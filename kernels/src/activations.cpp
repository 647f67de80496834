// Bias add and GELU as Kokkos kernels, next to the plain loops they must match.
//
// GELU is the one element-wise layer whose cost shows next to the matmuls
// around it, because of its tanh. The kernel uses the identity
//   1 + tanh(u) = 2σ(2u) = 2 / (1 + e^(−2u)),  so  gelu(x) = x / (1 + e^(−2u)),
// which needs one exp and one division and, unlike 1 − 2/(1 + e^(2u)), never
// subtracts nearly equal numbers. In float the exp is our own
// (detail::exp_saturating, vector_exp.h), because a call to glibc's expf keeps
// the loop scalar. The reference keeps the header's tanh formula, in double.
#include "dtw/kernels/activations.h"

#include <algorithm>
#include <cmath>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "vector_exp.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

// Element-wise kernels take one Kokkos index per block of kBlock elements: the
// block's inner loop has a fixed length, which GCC vectorises even at -O2 (its
// cheapest cost model skips loops of unknown length).
constexpr std::int64_t kBlock = 16;

// Columns per Kokkos index when a kernel sums down the rows (bias_backward):
// each index owns a strip of columns, so no two indices write the same sum.
constexpr std::int64_t kColumnStrip = 128;

constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
constexpr double kGeluCubic = 0.044715;

void check_size(const char* kernel, const char* name, std::int64_t value) {
  DTW_CHECK_ARG(value >= 0, kernel << ": " << name << " " << value << " is negative");
}

// gelu(x) = x·s with s = σ(2u) = 1/(1 + e), e = e^(−2u). In float the result is
// within (4 + 4|u|) ulp of the exact formula: 4 for the roundings and the exp,
// 4|u| for the rounding of u, which e^(−2u) magnifies exactly as gelu itself
// magnifies a rounding of x (so ≤ 8 ulp for x ≥ −1; activations_test checks it).
template <class T>
inline T gelu_value(T x) {
  const T u = T(kSqrt2OverPi) * x * (T(1) + T(kGeluCubic) * x * x);
  return x / (T(1) + detail::exp_saturating(T(-2) * u));
}

// gelu'(x) = s + x·s(1 − s)·2u' with 1 − s = e·s, u' = √(2/π)(1 + 3·0.044715x²).
// e·s is formed first: e alone may be ~1e38 and overflow a product.
template <class T>
inline T gelu_slope(T x) {
  const T x2 = x * x;
  const T u = T(kSqrt2OverPi) * x * (T(1) + T(kGeluCubic) * x2);
  const T e = detail::exp_saturating(T(-2) * u);
  const T s = T(1) / (T(1) + e);
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x2);
  return s * (T(1) + T(2) * x * (e * s) * du);
}

}  // namespace

template <class T>
void bias_add(T* y, const T* bias, std::int64_t rows, std::int64_t cols) {
  check_size("bias_add", "rows", rows);
  check_size("bias_add", "cols", cols);
  if (rows == 0 || cols == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::bias_add", host_range(0, rows), [=](std::int64_t r) {
    T* __restrict__ yr = y + r * cols;
    const T* __restrict__ b = bias;
    for (std::int64_t c = 0; c < cols; ++c) yr[c] += b[c];
  });
}

template <class T>
void bias_add_reference(T* y, const T* bias, std::int64_t rows, std::int64_t cols) {
  check_size("bias_add_reference", "rows", rows);
  check_size("bias_add_reference", "cols", cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
}

template <class T>
void bias_backward(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols) {
  check_size("bias_backward", "rows", rows);
  check_size("bias_backward", "cols", cols);
  if (rows == 0 || cols == 0) return;
  ensure_kokkos_initialized();
  const std::int64_t strips = (cols + kColumnStrip - 1) / kColumnStrip;
  Kokkos::parallel_for("dtw::bias_backward", host_range(0, strips), [=](std::int64_t s) {
    const std::int64_t begin = s * kColumnStrip;
    const std::int64_t width = std::min(kColumnStrip, cols - begin);
    // Walk the rows in order, adding each row's strip to per-column sums in
    // double: the reads stay contiguous and the sums barely round.
    double sum[kColumnStrip] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* dyr = dy + r * cols + begin;
      for (std::int64_t c = 0; c < width; ++c) sum[c] += static_cast<double>(dyr[c]);
    }
    for (std::int64_t c = 0; c < width; ++c)
      dbias[begin + c] = static_cast<T>(static_cast<double>(dbias[begin + c]) + sum[c]);
  });
}

template <class T>
void bias_backward_reference(T* dbias, const T* dy, std::int64_t rows, std::int64_t cols) {
  check_size("bias_backward_reference", "rows", rows);
  check_size("bias_backward_reference", "cols", cols);
  for (std::int64_t c = 0; c < cols; ++c) {
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += static_cast<double>(dy[r * cols + c]);
    dbias[c] = static_cast<T>(static_cast<double>(dbias[c]) + sum);
  }
}

template <class T>
void gelu_forward(T* y, const T* x, std::int64_t n) {
  check_size("gelu_forward", "n", n);
  if (n == 0) return;
  ensure_kokkos_initialized();
  const auto blocks = host_range(0, (n + kBlock - 1) / kBlock);
  Kokkos::parallel_for("dtw::gelu_forward", blocks, [=](std::int64_t b) {
    const std::int64_t begin = b * kBlock;
    // Read the block, then write it: correct when y aliases x.
    T v[kBlock];
    if (begin + kBlock <= n) {
      for (std::int64_t j = 0; j < kBlock; ++j) v[j] = gelu_value(x[begin + j]);
      for (std::int64_t j = 0; j < kBlock; ++j) y[begin + j] = v[j];
    } else {
      for (std::int64_t i = begin; i < n; ++i) y[i] = gelu_value(x[i]);
    }
  });
}

template <class T>
void gelu_forward_reference(T* y, const T* x, std::int64_t n) {
  check_size("gelu_forward_reference", "n", n);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    const double u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    y[i] = static_cast<T>(0.5 * v * (1.0 + std::tanh(u)));
  }
}

template <class T>
void gelu_backward(T* dx, const T* x, const T* dy, std::int64_t n) {
  check_size("gelu_backward", "n", n);
  if (n == 0) return;
  ensure_kokkos_initialized();
  const auto blocks = host_range(0, (n + kBlock - 1) / kBlock);
  Kokkos::parallel_for("dtw::gelu_backward", blocks, [=](std::int64_t b) {
    const std::int64_t begin = b * kBlock;
    T v[kBlock];  // as in gelu_forward: dx may alias dy
    if (begin + kBlock <= n) {
      for (std::int64_t j = 0; j < kBlock; ++j) v[j] = dy[begin + j] * gelu_slope(x[begin + j]);
      for (std::int64_t j = 0; j < kBlock; ++j) dx[begin + j] = v[j];
    } else {
      for (std::int64_t i = begin; i < n; ++i) dx[i] = dy[i] * gelu_slope(x[i]);
    }
  });
}

template <class T>
void gelu_backward_reference(T* dx, const T* x, const T* dy, std::int64_t n) {
  check_size("gelu_backward_reference", "n", n);
  for (std::int64_t i = 0; i < n; ++i) {
    // d/dx [x/2 · (1 + tanh u)] = (1 + tanh u)/2 + x/2 · sech²u · du/dx, with
    // sech²u = 1/cosh²u rather than 1 − tanh²u, which cancels for large |u|.
    const double v = static_cast<double>(x[i]);
    const double u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    const double sech = 1.0 / std::cosh(u);
    const double du = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * v * v);
    const double slope = 0.5 * (1.0 + std::tanh(u)) + 0.5 * v * sech * sech * du;
    dx[i] = static_cast<T>(static_cast<double>(dy[i]) * slope);
  }
}

template <class T>
void add_into(T* y, const T* x, std::int64_t n) {
  check_size("add_into", "n", n);
  if (n == 0) return;
  ensure_kokkos_initialized();
  const auto blocks = host_range(0, (n + kBlock - 1) / kBlock);
  Kokkos::parallel_for("dtw::add_into", blocks, [=](std::int64_t b) {
    const std::int64_t begin = b * kBlock;
    if (begin + kBlock <= n) {
      T v[kBlock];  // through a local block, as in gelu_forward, so no alias check is needed
      for (std::int64_t j = 0; j < kBlock; ++j) v[j] = y[begin + j] + x[begin + j];
      for (std::int64_t j = 0; j < kBlock; ++j) y[begin + j] = v[j];
    } else {
      for (std::int64_t i = begin; i < n; ++i) y[i] += x[i];
    }
  });
}

#define DTW_INSTANTIATE(T)                                                            \
  template void bias_add<T>(T*, const T*, std::int64_t, std::int64_t);                \
  template void bias_add_reference<T>(T*, const T*, std::int64_t, std::int64_t);      \
  template void bias_backward<T>(T*, const T*, std::int64_t, std::int64_t);           \
  template void bias_backward_reference<T>(T*, const T*, std::int64_t, std::int64_t); \
  template void gelu_forward<T>(T*, const T*, std::int64_t);                          \
  template void gelu_forward_reference<T>(T*, const T*, std::int64_t);                \
  template void gelu_backward<T>(T*, const T*, const T*, std::int64_t);               \
  template void gelu_backward_reference<T>(T*, const T*, const T*, std::int64_t);     \
  template void add_into<T>(T*, const T*, std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
