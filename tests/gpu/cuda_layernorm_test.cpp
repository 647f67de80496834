// The CUDA layer normalisation against layernorm.h's reference: float and
// double, one row, one column, odd sizes, more rows than the grid's block cap
// (70000 x 3) and a GPT-2-sized row (300 x 50257). Every output starts as NaN
// and every element is checked within a bound derived from the arithmetic;
// a second call must give the same bits. The argument checks need no GPU.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtw/kernels/cuda_layernorm.h"
#include "dtw/kernels/layernorm.h"
#include "gpu_test.h"
#include "kernel_test_util.h"
#include "row_kernel_check.h"

namespace dtw {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_invalid;
using kernel_test::random_values;
using testing::to_device;
using testing::poisoned;
using testing::sum_bound;
using testing::unit_roundoff;
using testing::within;

struct Shape {
  std::int64_t rows, cols;
};
const std::vector<Shape> kShapes = {{1, 1}, {1, 1000}, {7, 1}, {3, 257}, {33, 4097},
                                    {70000, 3}, {300, 50257}};

template <class T>
void check_forward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.cols;
  // Offset 3 next to a spread of 2: x − μ cancels a little, as real activations do.
  const auto x = random_values<T>(n, key, 2.0, 3.0);
  const auto gamma = random_values<T>(s.cols, key + 1, 0.5, 1.0);
  const auto beta = random_values<T>(s.cols, key + 2, 0.5);
  const T eps = T(1e-5);
  std::vector<T> y(n), mean(s.rows), rstd(s.rows);
  kernels::layernorm_forward_reference(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                       beta.data(), s.rows, s.cols, eps);
  auto dx = to_device(x), dgamma = to_device(gamma), dbeta = to_device(beta);
  std::vector<T> got[2][3];
  for (auto& out : got) {
    auto dy = poisoned<T>(n), dmean = poisoned<T>(s.rows), drstd = poisoned<T>(s.rows);
    kernels::device_layernorm_forward(dy.data(), dmean.data(), drstd.data(), dx.data(),
                                      dgamma.data(), dbeta.data(), s.rows, s.cols, eps);
    out[0] = dy.download(), out[1] = dmean.download(), out[2] = drstd.download();
  }
  // Both sides sum in double in different orders: sb bounds the difference of
  // a mean or variance relative to the mean of |terms| (2·γ_cols). The rest is
  // rounding (u of T; in double the reference's own roundings count too): the
  // saved μ and r are rounded once each; y takes x − μ, ·r, ·γ and +β in T;
  // the reference does the same four in double and rounds y to T: at most 11
  // roundings of the product's size (|x| + |μ|)·r·|γ|, bounded by 12u, and 4u
  // of |β| for the adds. r = 1/√(var + eps) moves by half var's relative error
  // (sb) plus two roundings to T and each side's +eps, √ and ÷ in double (6ud). In y the sums' share is the
  // mean's error (sb·mean|x|) and r's (sb·|x − μ|): 2sb of |x| + |μ| + mean|x|.
  const double u = unit_roundoff<T>(), sb = 2 * sum_bound(s.cols);
  std::vector<double> tol_y(n), tol_mean(s.rows), tol_rstd(s.rows);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double abs_mean = 0;
    for (std::int64_t c = 0; c < s.cols; ++c) abs_mean += std::fabs(double(x[r * s.cols + c]));
    abs_mean /= double(s.cols);
    const double mu = mean[r], rs = rstd[r];
    tol_mean[r] = 2 * u * std::fabs(mu) + sb * abs_mean;
    tol_rstd[r] = (2 * u + 6 * unit_roundoff<double>() + sb) * rs;
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const double xc = x[r * s.cols + c];
      tol_y[r * s.cols + c] = (12 * u + 2 * sb) * (std::fabs(xc) + std::fabs(mu) + abs_mean) *
                                  rs * std::fabs(double(gamma[c])) +
                              4 * u * std::fabs(double(beta[c]));
    }
  }
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " cols " << s.cols);
  EXPECT_EQ(within("y", got[0][0], y, tol_y), "");
  EXPECT_EQ(within("mean", got[0][1], mean, tol_mean), "");
  EXPECT_EQ(within("rstd", got[0][2], rstd, tol_rstd), "");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(got[0][i], got[1][i])) << "output " << i;
}

template <class T>
void check_backward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.cols;
  const auto x = random_values<T>(n, key, 2.0, 3.0);
  const auto dy = random_values<T>(n, key + 1);
  const auto gamma = random_values<T>(s.cols, key + 2, 0.5, 1.0);
  // dgamma and dbeta accumulate, so they start from data (NaN would stay NaN).
  const auto dgamma0 = random_values<T>(s.cols, key + 3), dbeta0 = random_values<T>(s.cols, key + 4);
  std::vector<T> y(n), mean(s.rows), rstd(s.rows);
  kernels::layernorm_forward_reference(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                       gamma.data(), s.rows, s.cols);
  std::vector<T> dx(n), dgamma = dgamma0, dbeta = dbeta0;
  kernels::layernorm_backward_reference(dx.data(), dgamma.data(), dbeta.data(), dy.data(),
                                        x.data(), mean.data(), rstd.data(), gamma.data(), s.rows,
                                        s.cols);
  auto d_x = to_device(x), d_dy = to_device(dy), d_gamma = to_device(gamma);
  auto d_mean = to_device(mean), d_rstd = to_device(rstd);
  std::vector<T> got[2][3];
  for (auto& out : got) {
    auto d_dx = poisoned<T>(n), d_dgamma = to_device(dgamma0), d_dbeta = to_device(dbeta0);
    kernels::device_layernorm_backward(d_dx.data(), d_dgamma.data(), d_dbeta.data(), d_dy.data(),
                                       d_x.data(), d_mean.data(), d_rstd.data(), d_gamma.data(),
                                       s.rows, s.cols);
    out[0] = d_dx.download(), out[1] = d_dgamma.download(), out[2] = d_dbeta.download();
  }
  // dx = r·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ. The reference works in
  // double from the same saved μ and r; the kernel rounds g, x̂ (two ops) and
  // the five ops of the final expression in T, the reference about as many in
  // double (which count when T is double): 16u of the magnitudes A = |g| +
  // |mean g| + |x̂|·|mean g·x̂|. The two row means are off by their sums' order
  // (sb of the mean |term|) and by their terms' and their own roundings (4u).
  // dgamma and dbeta: rows + 1 terms (the start value too) summed in double in
  // another order (sb_rows), dgamma's terms dy·x̂ carrying 3 roundings on each
  // side (6u), and both results rounded to T once on each side (2u).
  const double u = unit_roundoff<T>(), sb = 2 * sum_bound(s.cols);
  const double sb_rows = 2 * sum_bound(s.rows + 1);
  std::vector<double> tol_dx(n), abs_gamma(s.cols), abs_beta(s.cols);
  for (std::int64_t c = 0; c < s.cols; ++c)
    abs_gamma[c] = std::fabs(double(dgamma0[c])), abs_beta[c] = std::fabs(double(dbeta0[c]));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double mg = 0, mgx = 0, ag = 0, agx = 0;
    std::vector<double> g(s.cols), xhat(s.cols);
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const std::int64_t i = r * s.cols + c;
      xhat[c] = (double(x[i]) - mean[r]) * rstd[r];
      g[c] = double(dy[i]) * gamma[c];
      mg += g[c], mgx += g[c] * xhat[c], ag += std::fabs(g[c]), agx += std::fabs(g[c] * xhat[c]);
      abs_gamma[c] += std::fabs(double(dy[i]) * xhat[c]);
      abs_beta[c] += std::fabs(double(dy[i]));
    }
    const double cols = double(s.cols);
    mg /= cols, mgx /= cols, ag /= cols, agx /= cols;
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const double a = std::fabs(g[c]) + std::fabs(mg) + std::fabs(xhat[c]) * std::fabs(mgx);
      tol_dx[r * s.cols + c] =
          rstd[r] * (16 * u * a + (4 * u + sb) * (ag + std::fabs(xhat[c]) * agx));
    }
  }
  std::vector<double> tol_dgamma(s.cols), tol_dbeta(s.cols);
  for (std::int64_t c = 0; c < s.cols; ++c) {
    tol_dgamma[c] = (6 * u + sb_rows) * abs_gamma[c] + 2 * u * std::fabs(double(dgamma[c]));
    tol_dbeta[c] = sb_rows * abs_beta[c] + 2 * u * std::fabs(double(dbeta[c]));
  }
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " cols " << s.cols);
  EXPECT_EQ(within("dx", got[0][0], dx, tol_dx), "");
  EXPECT_EQ(within("dgamma", got[0][1], dgamma, tol_dgamma), "");
  EXPECT_EQ(within("dbeta", got[0][2], dbeta, tol_dbeta), "");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(got[0][i], got[1][i])) << "output " << i;

  // dx may alias dy: the same bits as into a separate buffer.
  auto d_dgamma = to_device(dgamma0), d_dbeta = to_device(dbeta0);
  kernels::device_layernorm_backward(d_dy.data(), d_dgamma.data(), d_dbeta.data(), d_dy.data(),
                                     d_x.data(), d_mean.data(), d_rstd.data(), d_gamma.data(),
                                     s.rows, s.cols);
  EXPECT_TRUE(bitwise_equal(d_dy.download(), got[0][0])) << "dx aliasing dy";
  EXPECT_TRUE(bitwise_equal(d_dgamma.download(), got[0][1])) << "dgamma with dx aliasing dy";
}

TEST(CudaLayernormTest, ForwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 100;
  for (Shape s : kShapes) check_forward<float>(s, key++), check_forward<double>(s, key++);
}

TEST(CudaLayernormTest, BackwardMatchesReferenceAndAccumulates) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 200;
  for (Shape s : kShapes) check_backward<float>(s, key += 8), check_backward<double>(s, key += 8);
}

// No GPU needed: the sizes are checked before any CUDA call, and no rows
// launch nothing (null pointers are never touched).
TEST(CudaLayernormTest, RejectsNegativeSizes) {
  float* p = nullptr;
  expect_invalid([&] { kernels::device_layernorm_forward(p, p, p, p, p, p, -2, 5); },
                 {"device_layernorm_forward", "rows -2", "cols 5"});
  expect_invalid([&] { kernels::device_layernorm_backward(p, p, p, p, p, p, p, p, 3, -1); },
                 {"device_layernorm_backward", "rows 3", "cols -1"});
}

TEST(CudaLayernormTest, NoRowsLaunchNothing) {
  double* p = nullptr;
  kernels::device_layernorm_forward(p, p, p, p, p, p, 0, 5);
  kernels::device_layernorm_backward(p, p, p, p, p, p, p, p, 0, 5);
  kernels::device_layernorm_backward(p, p, p, p, p, p, p, p, 4, 0);
}

}  // namespace
}  // namespace dtw
