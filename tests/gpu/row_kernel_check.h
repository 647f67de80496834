#pragma once
// What the row-wise kernels' GPU tests (layernorm, softmax, cross entropy)
// share: the rounding units their tolerances are built from, device buffers
// poisoned with NaN, and an element-by-element comparison against the host
// reference with a tolerance per element.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_test.h"

namespace dtw::testing {

/// u: the unit roundoff of T (half its epsilon), the relative error of one
/// correctly rounded operation in T.
template <class T>
constexpr double unit_roundoff() {
  return static_cast<double>(std::numeric_limits<T>::epsilon()) / 2;
}

/// The CUDA maths library's documented maximum errors: expf 2 ulp, exp 1 ulp.
template <class T>
constexpr double kExpUlps = sizeof(T) == 4 ? 2.0 : 1.0;

/// Higham's γ_n = n·u/(1 − n·u) with u the double unit roundoff: a sum of n
/// terms in double, in ANY order, is off by at most γ_n·Σ|term|. The kernels
/// and the references sum in different orders, so their difference is at most
/// twice this (callers write 2·sum_bound(n)).
inline double sum_bound(std::int64_t n) {
  const double nu = static_cast<double>(n) * unit_roundoff<double>();
  return nu / (1 - nu);
}

/// A device array of n elements, every one NaN: an output the kernel fails to
/// write stays NaN and fails the comparison.
template <class T>
DeviceArray<T> poisoned(std::int64_t n) {
  DeviceArray<T> a(static_cast<std::size_t>(n));
  a.upload(std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN()));
  return a;
}

/// Empty when |got[i] − want[i]| ≤ tol[i] for every i (a NaN never is);
/// otherwise how many elements failed and the worst one, named with `what`.
template <class T>
std::string within(const char* what, const std::vector<T>& got, const std::vector<T>& want,
                   const std::vector<double>& tol) {
  if (got.size() != want.size() || got.size() != tol.size())
    return std::string(what) + ": sizes differ";
  std::size_t bad = 0, worst = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (err <= tol[i]) continue;  // false for NaN
    const double ratio = std::isnan(err) ? INFINITY : err / tol[i];
    if (bad++ == 0 || ratio > worst_ratio) worst = i, worst_ratio = ratio;
  }
  if (bad == 0) return "";
  std::ostringstream out;
  out.precision(17);
  out << what << ": " << bad << " of " << got.size() << " elements outside tolerance; worst ["
      << worst << "] got " << got[worst] << " want " << want[worst] << " tol " << tol[worst];
  return out.str();
}

}  // namespace dtw::testing
