// bias_add, bias_backward, gelu and add_into (Kokkos kernels) against their
// plain-loop references, finite differences, the exact GELU, and themselves
// called from many threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dtw/kernels/activations.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

constexpr MatrixShape kShapes[] = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 13}, {64, 257}, {3, 300}};
// Element counts around the kernels' 16-element blocks, and a large odd one.
constexpr std::int64_t kCounts[] = {0, 1, 15, 16, 17, 33, 7 * 13, 64 * 257 + 5};

template <class T>
class ActivationsTest : public ::testing::Test {};
TYPED_TEST_SUITE(ActivationsTest, RealTypes);

TYPED_TEST(ActivationsTest, BiasAddMatchesReference) {
  using T = TypeParam;
  for (const MatrixShape& s : kShapes) {
    const std::vector<T> bias = random_values<T>(s.cols, 1);
    std::vector<T> got = random_values<T>(s.rows * s.cols, 2), want = got;
    kernels::bias_add(got.data(), bias.data(), s.rows, s.cols);
    kernels::bias_add_reference(want.data(), bias.data(), s.rows, s.cols);
    // One addition per element in both: bitwise equal.
    EXPECT_TRUE(bitwise_equal(want, got))
        << s.rows << "x" << s.cols << ": " << testing::compare(0, want, got);
  }
}

TYPED_TEST(ActivationsTest, BiasBackwardMatchesReference) {
  using T = TypeParam;
  for (const MatrixShape& s : kShapes) {
    const std::vector<T> dy = random_values<T>(s.rows * s.cols, 3);
    std::vector<T> got = random_values<T>(s.cols, 4), want = got;  // accumulates into these
    kernels::bias_backward(got.data(), dy.data(), s.rows, s.cols);
    kernels::bias_backward_reference(want.data(), dy.data(), s.rows, s.cols);
    // Both sum each column in double in row order, then add once: bitwise equal.
    EXPECT_TRUE(bitwise_equal(want, got))
        << s.rows << "x" << s.cols << ": " << testing::compare(0, want, got);
  }
}

TYPED_TEST(ActivationsTest, GeluMatchesReference) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::int64_t n : kCounts) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<T> x = random_values<T>(n, 5, 3.0), dy = random_values<T>(n, 6);
    std::vector<T> y(x.size()), y_ref(x.size()), dx(x.size()), dx_ref(x.size());
    kernels::gelu_forward(y.data(), x.data(), n);
    kernels::gelu_forward_reference(y_ref.data(), x.data(), n);
    // Kernel ≤ (4 + 4|u|) ulp of y (see activations.cpp); the reference's
    // 1 + tanh u cancels for x < 0 and errs by up to |x|/2 ulp of 1; |x| < 20 here.
    DTW_EXPECT_SAME(0, y_ref, y, 16 * eps);
    kernels::gelu_backward(dx.data(), x.data(), dy.data(), n);
    kernels::gelu_backward_reference(dx_ref.data(), x.data(), dy.data(), n);
    // The slope is within 4 ulp of max(1, |slope|) ≤ 1.13 (GeluFloatIsCloseToExact),
    // the product with dy adds half an ulp: under 6 ulp of max(1, |dy|).
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const double tol = 6 * eps * std::max(1.0, std::abs(static_cast<double>(dy[i])));
      ASSERT_NEAR(dx[i], dx_ref[i], tol) << "index " << i << ", x " << x[i];
    }
  }
}

TYPED_TEST(ActivationsTest, GeluInPlaceMatchesOutOfPlace) {
  using T = TypeParam;
  const std::int64_t n = 1001;
  const std::vector<T> x = random_values<T>(n, 7, 2.0), dy = random_values<T>(n, 8);
  std::vector<T> y(x.size()), in_place = x, dx(x.size()), dx_in_place = dy;
  kernels::gelu_forward(y.data(), x.data(), n);
  kernels::gelu_forward(in_place.data(), in_place.data(), n);
  EXPECT_TRUE(bitwise_equal(y, in_place));
  kernels::gelu_backward(dx.data(), x.data(), dy.data(), n);
  kernels::gelu_backward(dx_in_place.data(), x.data(), dx_in_place.data(), n);
  EXPECT_TRUE(bitwise_equal(dx, dx_in_place));
}

TYPED_TEST(ActivationsTest, GeluBackwardOverwritesDx) {
  using T = TypeParam;
  const std::int64_t n = 37;
  const std::vector<T> x = random_values<T>(n, 9), dy = random_values<T>(n, 10);
  std::vector<T> fresh(x.size(), T(0)), stale(x.size(), std::numeric_limits<T>::quiet_NaN());
  kernels::gelu_backward(fresh.data(), x.data(), dy.data(), n);
  kernels::gelu_backward(stale.data(), x.data(), dy.data(), n);
  EXPECT_TRUE(bitwise_equal(fresh, stale)) << testing::compare(0, fresh, stale);
}

TYPED_TEST(ActivationsTest, AddIntoAddsEveryElement) {
  using T = TypeParam;
  for (std::int64_t n : kCounts) {
    const std::vector<T> x = random_values<T>(n, 11), y0 = random_values<T>(n, 12);
    std::vector<T> y = y0, want(y0.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = y0[i] + x[i];
    kernels::add_into(y.data(), x.data(), n);
    EXPECT_TRUE(bitwise_equal(want, y)) << "n " << n << ": " << testing::compare(0, want, y);
  }
}

TYPED_TEST(ActivationsTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  expect_invalid([&] { kernels::bias_add(&v, &v, -3, 1); }, "rows -3");
  expect_invalid([&] { kernels::bias_add_reference(&v, &v, 1, -4); }, "cols -4");
  expect_invalid([&] { kernels::bias_backward(&v, &v, 2, -5); }, "cols -5");
  expect_invalid([&] { kernels::bias_backward_reference(&v, &v, -6, 2); }, "rows -6");
  expect_invalid([&] { kernels::gelu_forward(&v, &v, -7); }, "n -7");
  expect_invalid([&] { kernels::gelu_forward_reference(&v, &v, -8); }, "n -8");
  expect_invalid([&] { kernels::gelu_backward(&v, &v, &v, -9); }, "n -9");
  expect_invalid([&] { kernels::gelu_backward_reference(&v, &v, &v, -10); }, "n -10");
  expect_invalid([&] { kernels::add_into(&v, &v, -11); }, "n -11");
}

// The float GELU against the formula evaluated in long double. Relative error
// within (4 + 4|u|) ulp, u = √(2/π)(x + 0.044715x³): the bound stated in
// activations.cpp, ≤ 8 ulp wherever x ≥ −1. The slope within 4 ulp of
// max(1, |slope|): the exp's 2 ulp and a few roundings of terms no larger than 1.13.
TEST(ActivationsFloatTest, GeluFloatIsCloseToExact) {
  const long double eps = std::numeric_limits<float>::epsilon();
  // x from −9.5 to 10 in steps of 5e-4 (below −9.9 the exp's argument would be clamped).
  std::vector<float> x(39001);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i) - 19000) * 5e-4f + 1e-5f;
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> y(x.size()), slope(x.size()), ones(x.size(), 1.0f);
  kernels::gelu_forward(y.data(), x.data(), n);
  kernels::gelu_backward(slope.data(), x.data(), ones.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double v = x[i];
    const long double u = 0.79788456080286535588L * (v + 0.044715L * v * v * v);
    const long double s = 1 / (1 + std::exp(-2 * u));  // (1 + tanh u)/2, without cancellation
    const long double exact = v * s;
    const long double exact_slope =
        s + 2 * v * s * (1 - s) * 0.79788456080286535588L * (1 + 3 * 0.044715L * v * v);
    ASSERT_LE(std::abs(y[i] - exact), (4 + 4 * std::abs(u)) * eps * std::abs(exact))
        << "x " << x[i] << ": exact " << static_cast<double>(exact) << ", kernel " << y[i];
    ASSERT_LE(std::abs(slope[i] - exact_slope), 4 * eps * std::max(1.0L, std::abs(exact_slope)))
        << "x " << x[i] << ": exact slope " << static_cast<double>(exact_slope) << ", kernel "
        << slope[i];
  }
}

TYPED_TEST(ActivationsTest, GeluTailsStayFinite) {
  // Far left, gelu and its slope underflow towards 0; far right they are x and 1.
  // (Beyond |x| ~ 1e19, x² overflows a float; activations never live there.)
  using T = TypeParam;
  const std::vector<T> x{T(-1e6), T(-1e4), T(-100), T(-12), T(0), T(12), T(100), T(1e4), T(1e6)};
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<T> y(x.size()), slope(x.size()), ones(x.size(), T(1));
  kernels::gelu_forward(y.data(), x.data(), n);
  kernels::gelu_backward(slope.data(), x.data(), ones.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "x " << x[i]);
    ASSERT_TRUE(std::isfinite(y[i])) << y[i];
    ASSERT_TRUE(std::isfinite(slope[i])) << slope[i];
    if (x[i] < T(-11)) {
      // Exactly, both are below 1e-40 here; the float kernel's exp stops at
      // e^−87 ≈ 1.6e-38, which leaves |y| ~ 1e-38·|x| and |slope| ~ 1e-38·x².
      const double v = static_cast<double>(x[i]);
      EXPECT_LE(std::abs(static_cast<double>(y[i])), 1e-30 * std::abs(v)) << y[i];
      EXPECT_LE(std::abs(static_cast<double>(slope[i])), 1e-30 * v * v) << slope[i];
    } else if (x[i] > T(11)) {
      EXPECT_EQ(y[i], x[i]);
      EXPECT_EQ(slope[i], T(1));
    }
  }
  EXPECT_EQ(y[4], T(0));
  EXPECT_EQ(slope[4], T(0.5));
}

TEST(ActivationsGradientTest, GeluMatchesFiniteDifferences) {
  const std::int64_t n = 41;
  std::vector<double> x = testing::random_vector(n, 13, 2.0);
  const std::vector<double> w = testing::random_vector(n, 14);
  std::vector<double> y(x.size()), dx(x.size());
  const auto loss = [&] {
    kernels::gelu_forward(y.data(), x.data(), n);
    return testing::project(w, y);
  };
  kernels::gelu_backward(dx.data(), x.data(), w.data(), n);
  EXPECT_TRUE(testing::gradients_match("gelu dx", dx, testing::numeric_gradient(x, loss)));
}

TEST(ActivationsGradientTest, BiasMatchesFiniteDifferences) {
  const std::int64_t rows = 5, cols = 7;
  const std::vector<double> x = testing::random_vector(rows * cols, 15);
  const std::vector<double> w = testing::random_vector(rows * cols, 16);
  std::vector<double> bias = testing::random_vector(cols, 17);
  const auto loss = [&] {
    std::vector<double> y = x;
    kernels::bias_add(y.data(), bias.data(), rows, cols);
    return testing::project(w, y);
  };
  std::vector<double> dbias(static_cast<std::size_t>(cols), 0.0);
  kernels::bias_backward(dbias.data(), w.data(), rows, cols);
  EXPECT_TRUE(testing::gradients_match("dbias", dbias, testing::numeric_gradient(bias, loss)));
}

TEST(ActivationsGradientTest, BiasBackwardAccumulates) {
  const std::int64_t rows = 9, cols = 130;  // two column strips
  const std::vector<double> dy = testing::random_vector(rows * cols, 18);
  const std::vector<double> before = testing::random_vector(cols, 19);
  std::vector<double> fresh(static_cast<std::size_t>(cols), 0.0), accumulated = before;
  kernels::bias_backward(fresh.data(), dy.data(), rows, cols);
  kernels::bias_backward(accumulated.data(), dy.data(), rows, cols);
  for (std::size_t c = 0; c < fresh.size(); ++c)
    EXPECT_EQ(accumulated[c], before[c] + fresh[c]) << "column " << c;  // one double add each
}

TEST(ActivationsConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kRows = 16, kCols = 65;
#else
  constexpr std::int64_t kRows = 256, kCols = 513;
#endif
  // Every thread runs the whole layer on its own data; results must equal a
  // lone call's bit for bit, whatever the other threads do meanwhile.
  expect_concurrent_matches_serial([](int t) {
    const auto key = static_cast<std::uint64_t>(1000 + 10 * t);
    std::vector<float> x = random_values<float>(kRows * kCols, key, 2.0);
    const std::vector<float> bias = random_values<float>(kCols, key + 1);
    const std::vector<float> dy = random_values<float>(kRows * kCols, key + 2);
    std::vector<float> y(x.size()), dx(x.size()), dbias(static_cast<std::size_t>(kCols), 0.0f);
    kernels::bias_add(x.data(), bias.data(), kRows, kCols);
    kernels::gelu_forward(y.data(), x.data(), kRows * kCols);
    kernels::gelu_backward(dx.data(), x.data(), dy.data(), kRows * kCols);
    kernels::bias_backward(dbias.data(), dx.data(), kRows, kCols);
    kernels::add_into(y.data(), dx.data(), kRows * kCols);
    return std::vector<std::vector<float>>{y, dx, dbias};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
