// The vectorisable float exps of kernels/src/vector_exp.h (an internal header,
// hence the relative include) against long double, at their edges (underflow,
// overflow, infinities, NaN), and the row loops built on them against the
// element-by-element function.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernel_test_util.h"
#include "vector_exp.h"  // kernels/src: the test target adds that folder

namespace dtw::kernel_test {
namespace {

using kernels::detail::exp_flush;
using kernels::detail::exp_saturating;
using kernels::detail::kExpOverflow;
using kernels::detail::kExpUnderflow;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |got − e^z| in ulps of the exact value (the spacing of floats in its binade).
double ulp_error(float z, float got) {
  const long double exact = std::exp(static_cast<long double>(z));
  int exponent = 0;
  std::frexp(exact, &exponent);  // exact = m·2^exponent, m in [0.5, 1)
  const long double ulp = std::ldexp(1.0L, exponent - std::numeric_limits<float>::digits);
  return static_cast<double>(std::abs(static_cast<long double>(got) - exact) / ulp);
}

// z from −104 (below the smallest subnormal's log) to 89 (above ln FLT_MAX);
// steps of 2⁻¹⁴ are exact in float there, ~3·10⁶ points.
std::vector<float> dense_grid() {
#ifdef DTW_TSAN
  constexpr int kStepsPerUnit = 1 << 8;
#else
  constexpr int kStepsPerUnit = 1 << 14;
#endif
  std::vector<float> z;
  for (int i = -104 * kStepsPerUnit; i <= 89 * kStepsPerUnit; ++i)
    z.push_back(static_cast<float>(i) / kStepsPerUnit);
  return z;
}

// Every float within 200 ulps of `center`, both sides.
std::vector<float> floats_around(float center) {
  std::vector<float> z;
  const auto bits = std::bit_cast<std::int32_t>(center);
  for (std::int32_t d = -200; d <= 200; ++d) z.push_back(std::bit_cast<float>(bits + d));
  return z;
}

// The header's bound: 1.22 ulp measured over every float of the range; 1.25 here.
constexpr double kMaxUlps = 1.25;

void expect_flush_matches_exact(const std::vector<float>& grid) {
  for (const float z : grid) {
    const float got = exp_flush(z);
    if (z < kExpUnderflow) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), 0u) << "z " << z << ": want +0, got " << got;
    } else if (z > kExpOverflow) {
      ASSERT_EQ(got, kInf) << "z " << z;
    } else {
      ASSERT_GE(got, std::numeric_limits<float>::min()) << "z " << z << ": not a normal float";
      ASSERT_LE(ulp_error(z, got), kMaxUlps) << "z " << z << ", got " << got;
    }
  }
}

TEST(VectorExpTest, FlushIsWithinBoundOnDenseGrid) {
  expect_flush_matches_exact(dense_grid());
}

TEST(VectorExpTest, FlushSwitchesExactlyAtItsThresholds) {
  expect_flush_matches_exact(floats_around(kExpUnderflow));
  expect_flush_matches_exact(floats_around(kExpOverflow));
  // The thresholds are the ones documented: the largest float with a finite
  // e^z, and a value whose e^z is normal but only just (below 2⁻¹²⁵).
  EXPECT_EQ(std::nextafter(kExpOverflow, kInf), 88.72283935546875f);
  EXPECT_LT(std::exp(static_cast<double>(kExpOverflow)), std::numeric_limits<float>::max());
  EXPECT_GT(std::exp(static_cast<double>(std::nextafter(kExpOverflow, kInf))),
            std::numeric_limits<float>::max());
  EXPECT_GT(std::exp(static_cast<double>(kExpUnderflow)), std::numeric_limits<float>::min());
  EXPECT_LT(std::exp(static_cast<double>(kExpUnderflow)), std::ldexp(1.0, -125));
}

TEST(VectorExpTest, ZeroGivesExactlyOne) {
  EXPECT_EQ(exp_flush(0.0f), 1.0f);
  EXPECT_EQ(exp_flush(-0.0f), 1.0f);
  EXPECT_EQ(exp_saturating(0.0f), 1.0f);
  // Tiny arguments, subnormal ones included, round to 1 as e^z does.
  for (const float z : {1e-30f, -1e-30f, 1e-40f, -1e-40f, 1e-8f, -1e-8f})
    EXPECT_EQ(exp_flush(z), 1.0f) << "z " << z;
}

TEST(VectorExpTest, FlushHandlesInfinitiesAndNaN) {
  EXPECT_EQ(std::bit_cast<std::uint32_t>(exp_flush(-kInf)), 0u);  // +0: a masked score
  EXPECT_EQ(exp_flush(kInf), kInf);
  EXPECT_EQ(exp_flush(1e30f), kInf);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(exp_flush(-1e30f)), 0u);
  EXPECT_TRUE(std::isnan(exp_flush(kNaN)));
  EXPECT_TRUE(std::isnan(exp_flush(-kNaN)));
  EXPECT_TRUE(std::isnan(exp_flush(std::numeric_limits<float>::signaling_NaN())));
}

// GELU's exp: the same accuracy on |z| ≤ 87, the clamped value beyond.
TEST(VectorExpTest, SaturatingIsWithinBoundAndClampsAt87) {
  for (const float z : dense_grid()) {
    if (std::abs(z) > 87.0f) continue;
    ASSERT_LE(ulp_error(z, exp_saturating(z)), kMaxUlps) << "z " << z;
  }
  for (const float z : {87.5f, 100.0f, 1e6f, kInf}) {
    EXPECT_EQ(exp_saturating(z), exp_saturating(87.0f)) << "z " << z;
    EXPECT_EQ(exp_saturating(-z), exp_saturating(-87.0f)) << "z " << -z;
  }
  EXPECT_TRUE(std::isfinite(exp_saturating(kNaN)));  // documented: NaN is clamped too
  EXPECT_GE(exp_saturating(-87.0f), std::numeric_limits<float>::min());
  EXPECT_EQ(exp_saturating(1e6), std::exp(700.0));  // double: std::exp, kept finite
}

// Row lengths around the 8-element blocks: 0, short rows (padded), exact
// blocks, blocks plus a tail.
constexpr std::int64_t kLengths[] = {0, 1, 5, 7, 8, 9, 15, 16, 17, 33, 100, 1000};

template <class T>
T element_exp(T z) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_flush(z);
  } else {
    return std::exp(z);
  }
}

template <class T>
class VectorExpRowTest : public ::testing::Test {};
TYPED_TEST_SUITE(VectorExpRowTest, RealTypes);

// Every element, in a block or in the padded tail, equals the one-element
// function bit for bit (so a value does not depend on where it sits), and the
// sum is Σ y in double up to the partial sums' rounding: n·ε of double.
TYPED_TEST(VectorExpRowTest, ShiftedRowMatchesElementwise) {
  using T = TypeParam;
  for (const std::int64_t n : kLengths) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<T> x = random_values<T>(n, 1, 20.0);  // past the underflow point
    const T shift = n > 0 ? *std::max_element(x.begin(), x.end()) : T(0);
    std::vector<T> y(x.size(), T(-1)), y_sum(x.size()), in_place = x;
    kernels::detail::exp_shifted(y.data(), x.data(), shift, n);
    const double sum = kernels::detail::exp_shifted_sum(y_sum.data(), x.data(), shift, n);
    kernels::detail::exp_shifted_sum(in_place.data(), in_place.data(), shift, n);
    long double want_sum = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T want = element_exp(static_cast<T>(x[i] - shift));
      ASSERT_EQ(y[i], want) << "index " << i;
      ASSERT_EQ(y_sum[i], want) << "index " << i;
      ASSERT_EQ(in_place[i], want) << "index " << i;
      want_sum += static_cast<long double>(want);
    }
    const double eps = std::numeric_limits<double>::epsilon();
    EXPECT_NEAR(sum, static_cast<double>(want_sum),
                static_cast<double>(n) * eps * static_cast<double>(want_sum));
    if (n > 0) {
      EXPECT_GE(sum, 1.0);  // the maximum's term is e⁰ = 1
    }
  }
}

// Masked scores (−∞) give exactly 0 and add nothing; a NaN stays NaN.
TYPED_TEST(VectorExpRowTest, MinusInfinityGivesZeroAndNaNPropagates) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  for (const std::int64_t n : {std::int64_t{3}, std::int64_t{16}, std::int64_t{21}}) {
    std::vector<T> x(static_cast<std::size_t>(n), -inf), y(x.size());
    x[1] = T(0);
    EXPECT_EQ(kernels::detail::exp_shifted_sum(y.data(), x.data(), T(0), n), 1.0) << "n " << n;
    for (std::size_t i = 0; i < y.size(); ++i)
      EXPECT_EQ(y[i], i == 1 ? T(1) : T(0)) << "n " << n << ", index " << i;
    x.back() = std::numeric_limits<T>::quiet_NaN();
    EXPECT_TRUE(std::isnan(kernels::detail::exp_shifted_sum(y.data(), x.data(), T(0), n)));
    EXPECT_TRUE(std::isnan(y.back()));
    EXPECT_EQ(y[1], T(1));
  }
}

TYPED_TEST(VectorExpRowTest, RowMaxMatchesMaxElement) {
  using T = TypeParam;
  for (const std::int64_t n : kLengths) {
    if (n == 0) continue;  // row_max needs an element
    std::vector<T> x = random_values<T>(n, 2, 20.0);
    EXPECT_EQ(kernels::detail::row_max(x.data(), n), *std::max_element(x.begin(), x.end()))
        << "n " << n;
    // The maximum in the padded tail, then first: both found.
    x.back() = T(1e6);
    EXPECT_EQ(kernels::detail::row_max(x.data(), n), T(1e6)) << "n " << n;
    x.front() = T(2e6);
    EXPECT_EQ(kernels::detail::row_max(x.data(), n), T(2e6)) << "n " << n;
    // A NaN after the first element is skipped, as by the one-by-one loop.
    if (n > 1) {
      x[static_cast<std::size_t>(n / 2)] = std::numeric_limits<T>::quiet_NaN();
      EXPECT_EQ(kernels::detail::row_max(x.data(), n), T(2e6)) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace dtw::kernel_test
