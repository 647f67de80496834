// softmax_forward/backward (Kokkos kernels) against their plain-loop
// references, finite differences, huge logits, and many threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dtw/kernels/softmax.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

constexpr MatrixShape kShapes[] = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 13}, {64, 257}, {3, 1000}};

// Relative error allowed in softmax element i: the kernel rounds x − max in T
// (0.5 ulp of |x − max|, which exp turns into that much relative error), then
// exp (≤ 1.22 ulp for the float kernel's vectorised exp, kernels/src/vector_exp.h;
// ≤ 1 for std::exp), 1/sum (0.5 ulp) and the product (0.5 ulp): 2.72 ulp, under
// the (3 + |x − max|/2) ulp of T allowed; and the sums (in double, in a different order from the
// reference's) differ by up to cols ulp of double.
template <class T>
double softmax_tolerance(const std::vector<T>& x, std::size_t i, std::int64_t cols) {
  const std::size_t row = i - i % static_cast<std::size_t>(cols);
  T max = x[row];
  for (std::size_t c = row; c < row + static_cast<std::size_t>(cols); ++c)
    max = std::max(max, x[c]);
  return (3 + std::abs(static_cast<double>(x[i]) - static_cast<double>(max)) / 2) *
             std::numeric_limits<T>::epsilon() +
         static_cast<double>(cols) * kDoubleEps;
}

template <class T>
class SoftmaxTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxTest, RealTypes);

TYPED_TEST(SoftmaxTest, MatchesReference) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (const MatrixShape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
    const std::vector<T> x = random_values<T>(s.rows * s.cols, 1, 3.0);
    const std::vector<T> dy = random_values<T>(s.rows * s.cols, 2);
    std::vector<T> y(n), y_ref(n), dx(n), dx_ref(n);
    kernels::softmax_forward(y.data(), x.data(), s.rows, s.cols);
    kernels::softmax_forward_reference(y_ref.data(), x.data(), s.rows, s.cols);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], y_ref[i], softmax_tolerance(x, i, s.cols) * std::abs(y_ref[i]))
          << "index " << i;
    // Backward from the reference's y: dx = y·(dy − Σy·dy), the dot product
    // in double, rounded to T, two operations in T: ≤ 2 ulp of y·(|dy| + |Σy·dy|);
    // the two dot products differ by up to cols ulp of double of Σ|y·dy|.
    kernels::softmax_backward(dx.data(), y_ref.data(), dy.data(), s.rows, s.cols);
    kernels::softmax_backward_reference(dx_ref.data(), y_ref.data(), dy.data(), s.rows, s.cols);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      double dot = 0, abs_dot = 0;
      for (std::int64_t c = 0; c < s.cols; ++c) {
        const auto i = static_cast<std::size_t>(r * s.cols + c);
        dot += static_cast<double>(y_ref[i]) * dy[i];
        abs_dot += std::abs(static_cast<double>(y_ref[i]) * dy[i]);
      }
      const double dot_tol = static_cast<double>(s.cols) * kDoubleEps * abs_dot;
      for (std::int64_t c = 0; c < s.cols; ++c) {
        const auto i = static_cast<std::size_t>(r * s.cols + c);
        const double tol =
            std::abs(y_ref[i]) * (2 * eps * (std::abs(dy[i]) + std::abs(dot)) + dot_tol);
        ASSERT_NEAR(dx[i], dx_ref[i], tol) << "row " << r << " column " << c;
      }
    }
  }
}

TYPED_TEST(SoftmaxTest, RowsSumToOne) {
  using T = TypeParam;
  const std::int64_t rows = 9, cols = 301;
  const std::vector<T> x = random_values<T>(rows * cols, 3, 5.0);
  std::vector<T> y(x.size());
  kernels::softmax_forward(y.data(), x.data(), rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    // Exact values sum to 1; each kernel value errs by softmax_tolerance
    // relative, and this sum in double by up to cols ulp of double.
    double sum = 0, tol = static_cast<double>(cols) * kDoubleEps;
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      sum += y[i];
      tol += softmax_tolerance(x, i, cols) * y[i];
    }
    EXPECT_NEAR(sum, 1.0, tol) << "row " << r;
  }
}

TYPED_TEST(SoftmaxTest, HugeLogitsStayFinite) {
  // e^(1e4) overflows any type; with the maximum subtracted nothing does.
  using T = TypeParam;
  const std::vector<T> x{T(1e4), T(-1e4), T(0), T(1e4) - T(1), T(1e4), T(-1e4), T(-1e4), T(-1e4)};
  std::vector<T> y(x.size());
  kernels::softmax_forward(y.data(), x.data(), 2, 4);
  const double e = std::exp(-1.0);
  const std::vector<double> want{1 / (1 + e), 0, 0, e / (1 + e), 1, 0, 0, 0};
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << "index " << i;
    EXPECT_NEAR(y[i], want[i], 4 * std::numeric_limits<T>::epsilon()) << "index " << i;
  }
  std::vector<T> dx(y.size()), dy = random_values<T>(8, 4);
  kernels::softmax_backward(dx.data(), y.data(), dy.data(), 2, 4);
  for (T v : dx) EXPECT_TRUE(std::isfinite(v)) << v;
}

TYPED_TEST(SoftmaxTest, InPlaceMatchesOutOfPlace) {
  using T = TypeParam;
  const std::int64_t rows = 6, cols = 77;
  const std::vector<T> x = random_values<T>(rows * cols, 5, 2.0),
                       dy = random_values<T>(rows * cols, 6);
  std::vector<T> y(x.size()), in_place = x;
  kernels::softmax_forward(y.data(), x.data(), rows, cols);
  kernels::softmax_forward(in_place.data(), in_place.data(), rows, cols);
  EXPECT_TRUE(bitwise_equal(y, in_place));
  std::vector<T> dx(x.size()), dx_in_place = dy;
  kernels::softmax_backward(dx.data(), y.data(), dy.data(), rows, cols);
  kernels::softmax_backward(dx_in_place.data(), y.data(), dx_in_place.data(), rows, cols);
  EXPECT_TRUE(bitwise_equal(dx, dx_in_place));
}

TYPED_TEST(SoftmaxTest, BackwardOverwritesDx) {
  using T = TypeParam;
  const std::int64_t rows = 3, cols = 17;
  const std::vector<T> y = random_values<T>(rows * cols, 7), dy = random_values<T>(rows * cols, 8);
  std::vector<T> fresh(y.size(), T(0)), stale(y.size(), std::numeric_limits<T>::quiet_NaN());
  kernels::softmax_backward(fresh.data(), y.data(), dy.data(), rows, cols);
  kernels::softmax_backward(stale.data(), y.data(), dy.data(), rows, cols);
  EXPECT_TRUE(bitwise_equal(fresh, stale)) << testing::compare(0, fresh, stale);
}

TYPED_TEST(SoftmaxTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  expect_invalid([&] { kernels::softmax_forward(&v, &v, -3, 1); }, "rows -3");
  expect_invalid([&] { kernels::softmax_forward_reference(&v, &v, 1, -4); }, "cols -4");
  expect_invalid([&] { kernels::softmax_backward(&v, &v, &v, 1, -5); }, "cols -5");
  expect_invalid([&] { kernels::softmax_backward_reference(&v, &v, &v, -6, 1); }, "rows -6");
}

TEST(SoftmaxGradientTest, MatchesFiniteDifferences) {
  const std::int64_t rows = 4, cols = 9;
  std::vector<double> x = testing::random_vector(rows * cols, 10, 2.0);
  const std::vector<double> w = testing::random_vector(rows * cols, 11);
  std::vector<double> y(x.size()), dx(x.size());
  const auto loss = [&] {
    kernels::softmax_forward(y.data(), x.data(), rows, cols);
    return testing::project(w, y);
  };
  loss();
  kernels::softmax_backward(dx.data(), y.data(), w.data(), rows, cols);
  EXPECT_TRUE(testing::gradients_match("softmax dx", dx, testing::numeric_gradient(x, loss)));
}

TEST(SoftmaxConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kRows = 16, kCols = 65;
#else
  constexpr std::int64_t kRows = 256, kCols = 513;
#endif
  // Each thread runs forward and backward on its own data; the results must
  // equal a lone call's bit for bit.
  expect_concurrent_matches_serial([](int t) {
    const auto key = static_cast<std::uint64_t>(100 + 10 * t);
    const std::vector<float> x = random_values<float>(kRows * kCols, key, 3.0);
    const std::vector<float> dy = random_values<float>(kRows * kCols, key + 1);
    std::vector<float> y(x.size()), dx(x.size());
    kernels::softmax_forward(y.data(), x.data(), kRows, kCols);
    kernels::softmax_backward(dx.data(), y.data(), dy.data(), kRows, kCols);
    return std::vector<std::vector<float>>{y, dx};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
