#pragma once
// Finite-difference gradient checks in double precision, shared by the kernel
// and model tests.
//
// The pattern: make the layer's output a scalar by a fixed random projection,
// L(x) = Σ w_i · y_i(x), so the upstream gradient is dy = w. The backward pass
// then gives dL/dx analytically, and central differences
// (L(x + h e_j) − L(x − h e_j)) / 2h give it numerically. In double, with
// h = 1e-6 and smooth layers, the two agree to ~1e-8 relative; a wrong index
// or a missing term shows up as an error of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/model/random.h"

namespace dtw::testing {

/// n values drawn from N(0, scale²), keyed by `key` (the same key gives the same values).
inline std::vector<double> random_vector(std::int64_t n, std::uint64_t key, double scale = 1.0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = scale * model::normal(model::hash_key(key, i));
  return v;
}

/// Central-difference gradient of `loss` with respect to every element of x
/// (x is perturbed in place and restored).
inline std::vector<double> numeric_gradient(std::vector<double>& x,
                                            const std::function<double()>& loss,
                                            double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double saved = x[j];
    x[j] = saved + h;
    const double up = loss();
    x[j] = saved - h;
    const double down = loss();
    x[j] = saved;
    g[j] = (up - down) / (2 * h);
  }
  return g;
}

/// Success when every element agrees: |a − n| ≤ tol · max(1, |a|, |n|).
/// On failure names the tensor, the worst index and both values.
inline ::testing::AssertionResult gradients_match(const std::string& what,
                                                  const std::vector<double>& analytic,
                                                  const std::vector<double>& numeric,
                                                  double tol = 1e-6) {
  if (analytic.size() != numeric.size()) {
    return ::testing::AssertionFailure() << what << ": analytic gradient has " << analytic.size()
                                         << " elements, numeric " << numeric.size();
  }
  std::size_t worst = 0;
  double worst_err = -1;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const double scale = std::max({1.0, std::abs(analytic[i]), std::abs(numeric[i])});
    const double err = std::abs(analytic[i] - numeric[i]) / scale;
    if (!(err <= worst_err) || std::isnan(err)) {
      worst_err = err;
      worst = i;
    }
  }
  if (analytic.empty() || worst_err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": gradient mismatch at index " << worst << ": analytic "
         << analytic[worst] << ", numeric " << numeric[worst] << " (relative error "
         << worst_err << " > " << tol << ")";
}

/// Σ w_i · y_i: the scalar a gradient check differentiates.
inline double project(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0;
  for (std::size_t i = 0; i < w.size() && i < y.size(); ++i) s += w[i] * y[i];
  return s;
}

}  // namespace dtw::testing
