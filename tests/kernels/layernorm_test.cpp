// layernorm_forward/backward (Kokkos kernels) against their plain-loop
// references, finite differences, and themselves called from many threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dtw/kernels/layernorm.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

std::size_t size_of(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

constexpr MatrixShape kShapes[] = {{0, 0}, {0, 5}, {1, 1}, {7, 13}, {64, 257}, {3, 300}};

// One layer's inputs: x with a non-zero mean (so that x − μ matters), γ near
// 1, β and dy small. Keyed by `key`.
template <class T>
struct Inputs {
  std::vector<T> x, gamma, beta, dy;
  Inputs(std::int64_t rows, std::int64_t cols, std::uint64_t key)
      : x(random_values<T>(rows * cols, key, 1.5, 0.5)),
        gamma(random_values<T>(cols, key + 1, 0.2, 1.0)),
        beta(random_values<T>(cols, key + 2, 0.5)),
        dy(random_values<T>(rows * cols, key + 3)) {}
};

template <class T>
class LayernormTest : public ::testing::Test {};
TYPED_TEST_SUITE(LayernormTest, RealTypes);

TYPED_TEST(LayernormTest, MatchesReference) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (const MatrixShape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const Inputs<T> in(s.rows, s.cols, 1);
    const std::size_t n = size_of(s.rows * s.cols), r = size_of(s.rows), c = size_of(s.cols);
    std::vector<T> y(n), mean(r), rstd(r), y_ref(n), mean_ref(r), rstd_ref(r);
    kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), in.x.data(), in.gamma.data(),
                               in.beta.data(), s.rows, s.cols);
    kernels::layernorm_forward_reference(y_ref.data(), mean_ref.data(), rstd_ref.data(),
                                         in.x.data(), in.gamma.data(), in.beta.data(), s.rows,
                                         s.cols);
    // Statistics: both sum in double (in different orders: up to cols ulp of
    // double apart), then round once to T (one ulp of T apart at most).
    const double stat_tol = eps + static_cast<double>(s.cols) * kDoubleEps;
    DTW_EXPECT_SAME(0, mean_ref, mean, stat_tol);
    DTW_EXPECT_SAME(0, rstd_ref, rstd, stat_tol);
    // y: the kernel rounds μ and r to T and then takes four operations in T on
    // terms up to |x̂·γ| ≤ 7 here (|x̂| < 5, γ < 1.4): 6·0.5 ulp of 7 < 32 ulp of max(1, |y|).
    DTW_EXPECT_SAME(0, y_ref, y, 32 * eps);

    std::vector<T> dx(n), dx_ref(n);
    std::vector<T> dgamma = random_values<T>(s.cols, 7), dbeta = random_values<T>(s.cols, 8);
    std::vector<T> dgamma_ref = dgamma, dbeta_ref = dbeta;
    kernels::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), in.dy.data(), in.x.data(),
                                mean.data(), rstd.data(), in.gamma.data(), s.rows, s.cols);
    kernels::layernorm_backward_reference(dx_ref.data(), dgamma_ref.data(), dbeta_ref.data(),
                                          in.dy.data(), in.x.data(), mean.data(), rstd.data(),
                                          in.gamma.data(), s.rows, s.cols);
    // dx = r·(g − mean g − x̂·mean(g·x̂)): terms up to |dy·γ| + |x̂|·1 ≤ 12 here, r < 1.5,
    // about six roundings in T (3 ulp of 12·1.5 = 54 ulp at worst; 64 allowed).
    DTW_EXPECT_SAME(0, dx_ref, dx, 64 * eps);
    // dγ, dβ: each row's term is formed in T (3 roundings: 1.5 ulp of |dy·x̂|),
    // summed in double, rounded once: ≤ 2·eps·(Σ_rows |dy·x̂| + |dγ|), resp. |dy|.
    for (std::size_t j = 0; j < c; ++j) {
      double abs_dgamma = 0, abs_dbeta = 0;
      for (std::size_t i = 0; i < r; ++i) {
        const double xhat = (static_cast<double>(in.x[i * c + j]) - mean[i]) * rstd[i];
        abs_dgamma += std::abs(in.dy[i * c + j] * xhat);
        abs_dbeta += std::abs(in.dy[i * c + j]);
      }
      ASSERT_NEAR(dgamma[j], dgamma_ref[j], 2 * eps * (abs_dgamma + std::abs(dgamma_ref[j])))
          << "column " << j;
      ASSERT_NEAR(dbeta[j], dbeta_ref[j], 2 * eps * (abs_dbeta + std::abs(dbeta_ref[j])))
          << "column " << j;
    }
  }
}

TYPED_TEST(LayernormTest, BackwardAccumulatesParamsAndOverwritesDx) {
  using T = TypeParam;
  const std::int64_t rows = 5, cols = 130;  // two column strips
  const Inputs<T> in(rows, cols, 2);
  const std::size_t n = size_of(rows * cols);
  std::vector<T> y(n), mean(size_of(rows)), rstd(size_of(rows));
  kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), in.x.data(), in.gamma.data(),
                             in.beta.data(), rows, cols);
  const auto backward = [&](std::vector<T>& dx, std::vector<T>& dgamma, std::vector<T>& dbeta) {
    kernels::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), in.dy.data(), in.x.data(),
                                mean.data(), rstd.data(), in.gamma.data(), rows, cols);
  };
  std::vector<T> dx(n, T(0)), dgamma(size_of(cols), T(0)), dbeta(size_of(cols), T(0));
  backward(dx, dgamma, dbeta);
  // dx holds NaN before: overwritten, it must come out exactly as from zeros.
  const std::vector<T> before_gamma = random_values<T>(cols, 9),
                       before_beta = random_values<T>(cols, 10);
  std::vector<T> stale(n, std::numeric_limits<T>::quiet_NaN());
  std::vector<T> acc_gamma = before_gamma, acc_beta = before_beta;
  backward(stale, acc_gamma, acc_beta);
  EXPECT_TRUE(bitwise_equal(dx, stale)) << testing::compare(0, dx, stale);
  // dγ, dβ hold values before: the new sums are added to them (one rounding in T).
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t c = 0; c < dgamma.size(); ++c) {
    EXPECT_NEAR(acc_gamma[c], before_gamma[c] + dgamma[c],
                eps * (std::abs(before_gamma[c]) + std::abs(dgamma[c])))
        << "column " << c;
    EXPECT_NEAR(acc_beta[c], before_beta[c] + dbeta[c],
                eps * (std::abs(before_beta[c]) + std::abs(dbeta[c])))
        << "column " << c;
  }
}

TYPED_TEST(LayernormTest, ConstantRowGivesBeta) {
  // Variance 0: rstd is 1/√eps, x − μ is exactly 0, so y = β exactly and the
  // backward pass stays finite.
  using T = TypeParam;
  const std::int64_t rows = 2, cols = 9;
  const std::vector<T> x(size_of(rows * cols), T(3.25)),
      gamma = random_values<T>(cols, 11, 0.2, 1.0);
  const std::vector<T> beta = random_values<T>(cols, 12), dy = random_values<T>(rows * cols, 13);
  std::vector<T> y(x.size()), mean(2), rstd(2);
  kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                             beta.data(), rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(mean[size_of(r)], T(3.25));
    EXPECT_NEAR(rstd[size_of(r)], 1 / std::sqrt(1e-5), 1e-7 / std::sqrt(1e-5));
    for (std::int64_t c = 0; c < cols; ++c) EXPECT_EQ(y[size_of(r * cols + c)], beta[size_of(c)]);
  }
  std::vector<T> dx(x.size()), dgamma(size_of(cols), T(0)), dbeta(size_of(cols), T(0));
  kernels::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                              mean.data(), rstd.data(), gamma.data(), rows, cols);
  for (T v : dx) EXPECT_TRUE(std::isfinite(v)) << v;
  for (T v : dgamma) EXPECT_EQ(v, T(0));  // x̂ = 0 everywhere
}

TYPED_TEST(LayernormTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  expect_invalid([&] { kernels::layernorm_forward(&v, &v, &v, &v, &v, &v, -3, 4); }, "rows -3");
  expect_invalid([&] { kernels::layernorm_forward_reference(&v, &v, &v, &v, &v, &v, 1, -4); },
                 "cols -4");
  expect_invalid([&] { kernels::layernorm_backward(&v, &v, &v, &v, &v, &v, &v, &v, 2, -5); },
                 "cols -5");
  expect_invalid(
      [&] { kernels::layernorm_backward_reference(&v, &v, &v, &v, &v, &v, &v, &v, -6, 2); },
      "rows -6");
}

TEST(LayernormGradientTest, MatchesFiniteDifferences) {
  const std::int64_t rows = 3, cols = 11;
  Inputs<double> in(rows, cols, 20);
  const std::vector<double> w = testing::random_vector(rows * cols, 24);
  std::vector<double> y(size_of(rows * cols)), mean(size_of(rows)), rstd(size_of(rows));
  const auto loss = [&] {
    kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), in.x.data(), in.gamma.data(),
                               in.beta.data(), rows, cols);
    return testing::project(w, y);
  };
  loss();  // saves mean and rstd at the unperturbed point
  std::vector<double> dx(y.size()), dgamma(size_of(cols), 0.0), dbeta(size_of(cols), 0.0);
  kernels::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), w.data(), in.x.data(),
                              mean.data(), rstd.data(), in.gamma.data(), rows, cols);
  EXPECT_TRUE(testing::gradients_match("dx", dx, testing::numeric_gradient(in.x, loss)));
  EXPECT_TRUE(
      testing::gradients_match("dgamma", dgamma, testing::numeric_gradient(in.gamma, loss)));
  EXPECT_TRUE(testing::gradients_match("dbeta", dbeta, testing::numeric_gradient(in.beta, loss)));
}

TEST(LayernormConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kRows = 16, kCols = 65;
#else
  constexpr std::int64_t kRows = 256, kCols = 385;
#endif
  // Each thread runs forward and backward on its own data; the results must
  // equal a lone call's bit for bit.
  expect_concurrent_matches_serial([](int t) {
    const Inputs<float> in(kRows, kCols, static_cast<std::uint64_t>(100 + 10 * t));
    std::vector<float> y(in.x.size()), mean(kRows), rstd(kRows), dx(in.x.size());
    std::vector<float> dgamma(kCols, 0.0f), dbeta(kCols, 0.0f);
    kernels::layernorm_forward(y.data(), mean.data(), rstd.data(), in.x.data(), in.gamma.data(),
                               in.beta.data(), kRows, kCols);
    kernels::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), in.dy.data(), in.x.data(),
                                mean.data(), rstd.data(), in.gamma.data(), kRows, kCols);
    return std::vector<std::vector<float>>{y, mean, rstd, dx, dgamma, dbeta};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
