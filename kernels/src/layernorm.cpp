// Layer normalisation as Kokkos kernels, next to the plain loops they must match.
//
// Forward, per row: μ = mean(x), r = 1/√(var(x) + eps), x̂ = (x − μ)·r,
// y = x̂·γ + β. Backward, with g = dy·γ:
//   dx = r · (g − mean(g) − x̂ · mean(g·x̂)),  dγ += Σ_rows dy·x̂,  dβ += Σ_rows dy.
// Rows are independent, so the forward pass and dx take one Kokkos index per
// row; dγ and dβ sum down the rows, so they take one index per strip of
// columns instead (no two indices ever write the same element).
#include "dtw/kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

constexpr std::int64_t kLanes = 8;
constexpr std::int64_t kColumnStrip = 128;

void check_sizes(const char* kernel, std::int64_t rows, std::int64_t cols) {
  DTW_CHECK_ARG(rows >= 0 && cols >= 0, kernel << ": sizes must not be negative (rows " << rows
                                               << ", cols " << cols << ")");
}

// Σ term(c) over c in [0, n), in double with kLanes independent partial sums:
// one running sum would make every add wait for the previous one, and a
// fixed-width inner loop is what the compiler turns into vector adds. The
// order is fixed, so the result does not depend on the compiler.
template <class F>
inline double lane_sum(std::int64_t n, F term) {
  double part[kLanes] = {};
  std::int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (std::int64_t j = 0; j < kLanes; ++j) part[j] += term(c + j);
  double sum = 0;
  for (; c < n; ++c) sum += term(c);
  for (std::int64_t j = 0; j < kLanes; ++j) sum += part[j];
  return sum;
}

}  // namespace

template <class T>
void layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                       std::int64_t rows, std::int64_t cols, T eps) {
  check_sizes("layernorm_forward", rows, cols);
  if (rows == 0) return;
  ensure_kokkos_initialized();
  // A row of no columns has no mean; call it 0 with rstd 1/√eps, as the reference does.
  const double n = cols == 0 ? 1.0 : static_cast<double>(cols);
  Kokkos::parallel_for("dtw::layernorm_forward", host_range(0, rows), [=](std::int64_t r) {
    const T* xr = x + r * cols;
    // Two passes (mean, then squared deviations) in double: the one-pass
    // E[x²] − E[x]² cancels badly when the mean is large next to the spread.
    // Dividing (not multiplying by 1/n) makes the mean of a constant row
    // exactly that constant, so its x − μ is exactly 0.
    const auto value = [xr](std::int64_t c) { return static_cast<double>(xr[c]); };
    const double mu = lane_sum(cols, value) / n;
    const auto square = [xr, mu](std::int64_t c) {
      const double d = static_cast<double>(xr[c]) - mu;
      return d * d;
    };
    const double var = lane_sum(cols, square) / n;
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    // Normalise with the saved (rounded) statistics, the ones backward will see.
    const T m = mean[r], s = rstd[r];
    T* yr = y + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
  });
}

template <class T>
void layernorm_forward_reference(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                                 std::int64_t rows, std::int64_t cols, T eps) {
  check_sizes("layernorm_forward_reference", rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    double sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mu = cols == 0 ? 0.0 : sum / static_cast<double>(cols);
    double sq = 0;
    for (std::int64_t c = 0; c < cols; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
    const double var = cols == 0 ? 0.0 : sq / static_cast<double>(cols);
    const double rs = 1.0 / std::sqrt(var + static_cast<double>(eps));
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<T>((xr[c] - mu) * rs * gamma[c] + beta[c]);
  }
}

template <class T>
void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                        const T* rstd, const T* gamma, std::int64_t rows, std::int64_t cols) {
  check_sizes("layernorm_backward", rows, cols);
  if (rows == 0 || cols == 0) return;
  ensure_kokkos_initialized();
  // dγ and dβ first, while dy is intact: a caller may pass dx == dy.
  const std::int64_t strips = (cols + kColumnStrip - 1) / kColumnStrip;
  const auto range = host_range(0, strips);
  Kokkos::parallel_for("dtw::layernorm_backward_params", range, [=](std::int64_t j) {
    const std::int64_t begin = j * kColumnStrip;
    const std::int64_t width = std::min(kColumnStrip, cols - begin);
    double sum_gamma[kColumnStrip] = {}, sum_beta[kColumnStrip] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* dyr = dy + r * cols + begin;
      const T* xr = x + r * cols + begin;
      const T m = mean[r], s = rstd[r];
      for (std::int64_t c = 0; c < width; ++c) {
        sum_gamma[c] += static_cast<double>(dyr[c] * ((xr[c] - m) * s));
        sum_beta[c] += static_cast<double>(dyr[c]);
      }
    }
    for (std::int64_t c = 0; c < width; ++c) {
      dgamma[begin + c] = static_cast<T>(static_cast<double>(dgamma[begin + c]) + sum_gamma[c]);
      dbeta[begin + c] = static_cast<T>(static_cast<double>(dbeta[begin + c]) + sum_beta[c]);
    }
  });
  const double inv_cols = 1.0 / static_cast<double>(cols);
  Kokkos::parallel_for("dtw::layernorm_backward_dx", host_range(0, rows), [=](std::int64_t r) {
    const T* dyr = dy + r * cols;
    const T* xr = x + r * cols;
    const T m = mean[r], s = rstd[r];
    const auto g = [=](std::int64_t c) { return static_cast<double>(dyr[c] * gamma[c]); };
    const auto g_xhat = [=](std::int64_t c) {
      return static_cast<double>(dyr[c] * gamma[c]) * static_cast<double>((xr[c] - m) * s);
    };
    const T mean_g = static_cast<T>(lane_sum(cols, g) * inv_cols);
    const T mean_gx = static_cast<T>(lane_sum(cols, g_xhat) * inv_cols);
    T* dxr = dx + r * cols;
    for (std::int64_t c = 0; c < cols; ++c)
      dxr[c] = s * (dyr[c] * gamma[c] - mean_g - (xr[c] - m) * s * mean_gx);
  });
}

template <class T>
void layernorm_backward_reference(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x,
                                  const T* mean, const T* rstd, const T* gamma, std::int64_t rows,
                                  std::int64_t cols) {
  check_sizes("layernorm_backward_reference", rows, cols);
  const auto n = static_cast<std::size_t>(cols);
  std::vector<double> xhat(n), g(n), sum_gamma(n, 0.0), sum_beta(n, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum_g = 0, sum_gx = 0;
    for (std::size_t c = 0; c < n; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * n + c;
      xhat[c] = (static_cast<double>(x[i]) - mean[r]) * rstd[r];
      g[c] = static_cast<double>(dy[i]) * gamma[c];
      sum_g += g[c];
      sum_gx += g[c] * xhat[c];
      sum_gamma[c] += dy[i] * xhat[c];
      sum_beta[c] += dy[i];
    }
    for (std::size_t c = 0; c < n; ++c) {
      const double d = static_cast<double>(rstd[r]) * (g[c] - sum_g / static_cast<double>(n) -
                                                       xhat[c] * sum_gx / static_cast<double>(n));
      dx[static_cast<std::size_t>(r) * n + c] = static_cast<T>(d);
    }
  }
  for (std::size_t c = 0; c < n; ++c) {
    dgamma[c] = static_cast<T>(dgamma[c] + sum_gamma[c]);
    dbeta[c] = static_cast<T>(dbeta[c] + sum_beta[c]);
  }
}

#define DTW_INSTANTIATE(T)                                                                   \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, \
                                     std::int64_t, T);                                       \
  template void layernorm_forward_reference<T>(T*, T*, T*, const T*, const T*, const T*,     \
                                               std::int64_t, std::int64_t, T);               \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                      const T*, std::int64_t, std::int64_t);                 \
  template void layernorm_backward_reference<T>(T*, T*, T*, const T*, const T*, const T*,    \
                                                const T*, const T*, std::int64_t, std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
