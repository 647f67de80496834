// matmul (the BLAS) against matmul_reference (three loops in double), for every
// transpose combination on odd sizes, and from many threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dtw/kernels/matmul.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

using kernels::Trans;

struct Case {
  std::int64_t m, n, k;
};
// 0 and 1 in every position, odd and non-square shapes, and one with k > 256
// so that the BLAS blocks its inner loop.
constexpr Case kCases[] = {{0, 3, 4}, {3, 0, 4},  {0, 0, 0},  {1, 1, 1},    {1, 7, 1},
                           {7, 1, 5}, {7, 13, 5}, {13, 7, 1}, {31, 17, 29}, {64, 33, 257}};
constexpr Trans kTrans[] = {Trans::kNo, Trans::kYes};

// Checks C = alpha·op(A)·op(B) + beta·C0 against the reference, element by
// element, within the classic dot-product bound: a sum of k products in T
// errs by at most k·u·Σ|a·b| (u = eps/2), and the alpha and beta steps add a
// few more roundings, so (k + 2)·eps·(|alpha|·Σ|a·b| + |beta·c0|) holds for any
// summation order the BLAS picks. The bound matrix is the reference product
// of |A| and |B|.
template <class T>
void check_product(Trans ta, Trans tb, const Case& s, T alpha, T beta, const std::vector<T>& c0) {
  SCOPED_TRACE(::testing::Message()
               << "m " << s.m << " n " << s.n << " k " << s.k << " ta " << (ta == Trans::kYes)
               << " tb " << (tb == Trans::kYes) << " beta " << beta);
  const std::vector<T> a = random_values<T>(s.m * s.k, 1), b = random_values<T>(s.k * s.n, 2);
  std::vector<T> got = c0, want = c0;
  kernels::matmul(ta, tb, s.m, s.n, s.k, alpha, a.data(), b.data(), beta, got.data());
  kernels::matmul_reference(ta, tb, s.m, s.n, s.k, alpha, a.data(), b.data(), beta, want.data());
  std::vector<T> abs_a(a.size()), abs_b(b.size()), bound(c0.size());
  for (std::size_t i = 0; i < a.size(); ++i) abs_a[i] = std::abs(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) abs_b[i] = std::abs(b[i]);
  for (std::size_t i = 0; i < c0.size(); ++i) bound[i] = beta == T(0) ? T(0) : std::abs(c0[i]);
  kernels::matmul_reference(ta, tb, s.m, s.n, s.k, std::abs(alpha), abs_a.data(), abs_b.data(),
                            std::abs(beta), bound.data());
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = static_cast<double>(s.k + 2) * eps * static_cast<double>(bound[i]);
    ASSERT_LE(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])), tol)
        << "index " << i << ": reference " << want[i] << ", matmul " << got[i];
  }
}

template <class T>
class MatmulTest : public ::testing::Test {};
TYPED_TEST_SUITE(MatmulTest, RealTypes);

TYPED_TEST(MatmulTest, MatchesReferenceForEveryTransposeOnOddSizes) {
  using T = TypeParam;
  for (const Case& s : kCases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        check_product<T>(ta, tb, s, T(0.75), T(0), random_values<T>(s.m * s.n, 3));
}

TYPED_TEST(MatmulTest, BetaZeroIgnoresNaNInC) {
  using T = TypeParam;
  for (const Case& s : kCases) {
    for (Trans ta : kTrans) {
      for (Trans tb : kTrans) {
        const std::vector<T> nan_c(static_cast<std::size_t>(s.m * s.n),
                                   std::numeric_limits<T>::quiet_NaN());
        check_product<T>(ta, tb, s, T(1), T(0), nan_c);  // the bound would be NaN otherwise
      }
    }
  }
}

TYPED_TEST(MatmulTest, BetaOneAccumulatesIntoC) {
  using T = TypeParam;
  for (const Case& s : kCases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        check_product<T>(ta, tb, s, T(1), T(1), random_values<T>(s.m * s.n, 4));
}

TYPED_TEST(MatmulTest, AccumulatingTwiceDoublesTheProduct) {
  // beta = 1 must really add: C = A·B, then C += A·B gives 2·A·B. Small
  // integers make every product and sum exact, whatever order the BLAS adds in.
  using T = TypeParam;
  std::vector<T> a(5 * 3), b(3 * 4);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<int>(i % 7) - 3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<int>(i % 5) - 2);
  std::vector<T> once(20), twice(20);
  kernels::matmul(Trans::kNo, Trans::kNo, 5, 4, 3, T(1), a.data(), b.data(), T(0), once.data());
  kernels::matmul(Trans::kNo, Trans::kNo, 5, 4, 3, T(1), a.data(), b.data(), T(0), twice.data());
  kernels::matmul(Trans::kNo, Trans::kNo, 5, 4, 3, T(1), a.data(), b.data(), T(1), twice.data());
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]) << "index " << i;
}

TYPED_TEST(MatmulTest, ZeroInnerSizeScalesCByBeta) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> c{T(1), T(-2), T(3), T(4), T(5), T(-6)};
  kernels::matmul(Trans::kNo, Trans::kYes, 2, 3, 0, T(1), static_cast<const T*>(nullptr),
                  static_cast<const T*>(nullptr), T(2), c.data());
  EXPECT_EQ(c, (std::vector<T>{T(2), T(-4), T(6), T(8), T(10), T(-12)}));
  std::vector<T> nan_c(6, nan);
  kernels::matmul(Trans::kYes, Trans::kNo, 2, 3, 0, T(1), static_cast<const T*>(nullptr),
                  static_cast<const T*>(nullptr), T(0), nan_c.data());
  EXPECT_EQ(nan_c, std::vector<T>(6, T(0)));
  std::vector<T> ref_c(6, nan);
  kernels::matmul_reference(Trans::kYes, Trans::kNo, 2, 3, 0, T(1), static_cast<const T*>(nullptr),
                            static_cast<const T*>(nullptr), T(0), ref_c.data());
  EXPECT_EQ(ref_c, std::vector<T>(6, T(0)));
}

TYPED_TEST(MatmulTest, ReferenceComputesTheProduct) {
  // A hand-checked 2×3 · 3×2 product, so that the reference itself is pinned down.
  using T = TypeParam;
  const std::vector<T> a{T(1), T(2), T(3), T(4), T(5), T(6)};     // 2×3
  const std::vector<T> b{T(7), T(8), T(9), T(10), T(11), T(12)};  // 3×2
  std::vector<T> c(4, T(1));
  kernels::matmul_reference(Trans::kNo, Trans::kNo, 2, 2, 3, T(1), a.data(), b.data(), T(1),
                            c.data());
  EXPECT_EQ(c, (std::vector<T>{T(59), T(65), T(140), T(155)}));
  // Aᵀ stored as 3×2 and Bᵀ stored as 2×3 give the same product.
  const std::vector<T> at{T(1), T(4), T(2), T(5), T(3), T(6)};
  const std::vector<T> bt{T(7), T(9), T(11), T(8), T(10), T(12)};
  kernels::matmul_reference(Trans::kYes, Trans::kYes, 2, 2, 3, T(2), at.data(), bt.data(), T(0),
                            c.data());
  EXPECT_EQ(c, (std::vector<T>{T(116), T(128), T(278), T(308)}));
}

TYPED_TEST(MatmulTest, NegativeSizeIsInvalidArgument) {
  using T = TypeParam;
  T x = 0;
  expect_invalid([&] { kernels::matmul(Trans::kNo, Trans::kNo, -2, 1, 1, T(1), &x, &x, T(0), &x); },
                 "m -2");
  expect_invalid([&] { kernels::matmul(Trans::kNo, Trans::kNo, 1, -3, 1, T(1), &x, &x, T(0), &x); },
                 "n -3");
  expect_invalid(
      [&] { kernels::matmul(Trans::kYes, Trans::kNo, 1, 1, -4, T(1), &x, &x, T(0), &x); }, "k -4");
  expect_invalid(
      [&] { kernels::matmul_reference(Trans::kNo, Trans::kNo, -5, 1, 1, T(1), &x, &x, T(0), &x); },
      "m -5");
}

TEST(MatmulConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kSize = 24;
#else
  constexpr std::int64_t kSize = 160;
#endif
  // Each thread multiplies its own matrices; the result of a call must not
  // depend on what other threads do meanwhile (bitwise, not just closely).
  expect_concurrent_matches_serial([](int t) {
    const auto key = static_cast<std::uint64_t>(100 + t);
    const std::vector<float> a = random_values<float>(kSize * kSize, key);
    const std::vector<float> b = random_values<float>(kSize * kSize, key + 50);
    std::vector<float> c(static_cast<std::size_t>(kSize * kSize));
    for (int rep = 0; rep < 4; ++rep) {
      kernels::matmul(Trans::kNo, t % 2 ? Trans::kYes : Trans::kNo, kSize, kSize, kSize, 1.0f,
                      a.data(), b.data(), rep == 0 ? 0.0f : 0.5f, c.data());
    }
    return std::vector<std::vector<float>>{c};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
