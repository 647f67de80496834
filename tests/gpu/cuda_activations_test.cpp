// The device bias add, bias backward, GELU and add_into against their host
// references on odd and large shapes, outputs poisoned with NaN first, every
// element checked, each result computed twice and compared bit for bit, and
// the argument checks (which need no GPU).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "dtw/kernels/activations.h"
#include "dtw/kernels/cuda_activations.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

using testing::DeviceArray;
using testing::to_device;

// 1 row and 1 column; odd sizes that divide no block size; columns that are
// a multiple of the 16-byte vector (300: bias_add's vector path) and ones
// that are not; one matrix of a million elements; more columns (300007) than
// one pass of the grid has threads (132 SMs × 8 blocks × 256 = 270336), so the
// grid-stride loops are exercised; and a tall matrix whose rows (70001) make
// bias_backward sum 1094 chunks of 64 rows, the last one partial.
constexpr MatrixShape kShapes[] = {{1, 1},    {1, 257},     {257, 1},   {7, 13},
                                   {33, 300}, {1031, 1037}, {3, 300007}, {70001, 5}};
// Element counts below, at and above one block, and one past a grid's pass.
constexpr std::int64_t kCounts[] = {1, 15, 255, 256, 257, 1031, (1 << 21) + 7};

constexpr double kDoubleEpsilon = std::numeric_limits<double>::epsilon();

template <class T>
std::vector<T> nan_vector(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

template <class T>
class CudaActivationsTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaActivationsTest, RealTypes);

// One IEEE addition per element on both sides, correctly rounded: bitwise equal.
TYPED_TEST(CudaActivationsTest, BiasAddMatchesReferenceBitwise) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const MatrixShape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const std::vector<T> bias = random_values<T>(s.cols, 1),
                         y0 = random_values<T>(s.rows * s.cols, 2);
    std::vector<std::vector<T>> runs;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> dy = to_device(y0), db = to_device(bias);
      kernels::device_bias_add(dy.data(), db.data(), s.rows, s.cols);
      runs.push_back(dy.download());
    }
    std::vector<T> want = y0;
    kernels::bias_add_reference(want.data(), bias.data(), s.rows, s.cols);
    EXPECT_TRUE(bitwise_equal(runs[0], runs[1])) << "two runs differ";
    EXPECT_TRUE(bitwise_equal(want, runs[0])) << ::dtw::testing::compare(0, want, runs[0]);
  }
}

// dbias[c] += Σ_r dy[r][c]. Each side sums in double (rows − 1 additions,
// error ≤ rows·u_d·S with S = |dbias0[c]| + Σ_r |dy[r][c]|, u_d = eps_d/2, the
// final add included), then rounds once to T (≤ eps_T/2·|result|). Two such
// results differ by at most eps_T·|ref| + 2·(rows + 1)·eps_d·S. (The kernel
// adds in the reference's order, so in practice they agree bitwise.)
TYPED_TEST(CudaActivationsTest, BiasBackwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (const MatrixShape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const std::vector<T> dy = random_values<T>(s.rows * s.cols, 3),
                         db0 = random_values<T>(s.cols, 4);
    std::vector<std::vector<T>> runs;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> d_db = to_device(db0), d_dy = to_device(dy);
      kernels::device_bias_backward(d_db.data(), d_dy.data(), s.rows, s.cols);
      runs.push_back(d_db.download());
    }
    ASSERT_TRUE(bitwise_equal(runs[0], runs[1])) << "two runs differ";
    std::vector<T> want = db0;
    kernels::bias_backward_reference(want.data(), dy.data(), s.rows, s.cols);
    std::vector<double> magnitude(db0.size());
    for (std::int64_t c = 0; c < s.cols; ++c) magnitude[c] = std::abs(static_cast<double>(db0[c]));
    for (std::int64_t r = 0; r < s.rows; ++r)
      for (std::int64_t c = 0; c < s.cols; ++c)
        magnitude[c] += std::abs(static_cast<double>(dy[r * s.cols + c]));
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const double ref = static_cast<double>(want[c]);
      const double tol = eps * std::abs(ref) +
                         2.0 * static_cast<double>(s.rows + 1) * kDoubleEpsilon * magnitude[c];
      ASSERT_LE(std::abs(static_cast<double>(runs[0][c]) - ref), tol)
          << "column " << c << ": reference " << want[c] << ", device " << runs[0][c];
    }
  }
}

// gelu(x) = x / (1 + e), e = e^(−2u), u = √(2/π)(x + 0.044715x³), in T, against
// the reference's x/2·(1 + tanh u) in double rounded to T. Error budget, each
// rounding counted as a full eps (twice its worst case, so the compiler's
// choice of fused multiply-adds cannot matter):
//  - u is formed with ≤ 7 roundings (two constants, x², a·x², 1 + ·, two
//    products), a relative error δ ≤ 7·eps. y depends on u through e^(−2u):
//    |∂ln y/∂ln u| = 2|u|·(1 − s) ≤ 2|u| with s = 1/(1 + e) -- the condition of
//    gelu with respect to its inner argument -- so this gives ≤ 14|u|·eps·|y|.
//  - exp (≤ 2 ulp in CUDA's expf, 1 in exp), 1 + e and the division: ≤ 4·eps·|y|;
//    the reference's rounding to T: ≤ eps·|y|.
//  - Where both are tiny, absolute terms: the reference's 1 + tanh u cancels
//    for x < 0 (|x|/2 times a few eps_d, allowed 4·|x|·eps_d), and the kernel
//    clamps the exponent (float 87, double 700) so for very negative x it
//    returns ≈ x·e^(−87) where the exact value is smaller (allowed 2·|x|·e^(−clamp)).
// x ~ N(0, 3²) reaches |x| ≈ 15, so the float clamp is exercised.
template <class T>
double gelu_tolerance(double x, double y_ref) {
  const double eps = std::numeric_limits<T>::epsilon();
  const double clamp = std::is_same_v<T, float> ? 87.0 : 700.0;
  const double u = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x);
  return (5.0 + 14.0 * std::abs(u)) * eps * std::abs(y_ref) +
         std::abs(x) * (4.0 * kDoubleEpsilon + 2.0 * std::exp(-clamp));
}

TYPED_TEST(CudaActivationsTest, GeluForwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (std::int64_t n : kCounts) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<T> x = random_values<T>(n, 5, 3.0);
    DeviceArray<T> dx = to_device(x), dy = to_device(nan_vector<T>(n));
    kernels::device_gelu_forward(dy.data(), dx.data(), n);
    const std::vector<T> got = dy.download();
    dy.upload(nan_vector<T>(n));
    kernels::device_gelu_forward(dy.data(), dx.data(), n);
    ASSERT_TRUE(bitwise_equal(got, dy.download())) << "two runs differ";
    kernels::device_gelu_forward(dx.data(), dx.data(), n);  // in place: y aliases x
    ASSERT_TRUE(bitwise_equal(got, dx.download())) << "in place differs";
    std::vector<T> want(x.size());
    kernels::gelu_forward_reference(want.data(), x.data(), n);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double tol = gelu_tolerance<T>(static_cast<double>(x[i]), static_cast<double>(want[i]));
      ASSERT_LE(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])), tol)
          << "index " << i << ", x " << x[i] << ": reference " << want[i] << ", device " << got[i];
    }
  }
}

// dx = dy·gelu'(x), gelu' = s·(1 + 2x·(e·s)·u'), |gelu'| ≤ 1.13 everywhere.
// Slope error, each rounding a full eps: ~10 roundings and the exp's 2 ulp on
// terms no larger than 1.13 (≤ 13·eps), plus u's 7·eps relative error times
// |u·∂gelu'/∂u| = |u·gelu''/u'|, which stays below 0.25 (its peak near x ≈ 1),
// ≤ 2·eps; the product with dy and the reference's rounding add ≤ 2·eps·|dy|·1.13.
// So |dx − dx_ref| ≤ 16·eps·|dy|, an absolute bound because the slope's own
// roundings are absolute near its zero (x ≈ −0.75), not relative.
TYPED_TEST(CudaActivationsTest, GeluBackwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::int64_t n : kCounts) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<T> x = random_values<T>(n, 6, 3.0), dy = random_values<T>(n, 7);
    DeviceArray<T> d_x = to_device(x), d_dy = to_device(dy), d_dx = to_device(nan_vector<T>(n));
    kernels::device_gelu_backward(d_dx.data(), d_x.data(), d_dy.data(), n);
    const std::vector<T> got = d_dx.download();
    d_dx.upload(nan_vector<T>(n));
    kernels::device_gelu_backward(d_dx.data(), d_x.data(), d_dy.data(), n);
    ASSERT_TRUE(bitwise_equal(got, d_dx.download())) << "two runs differ";
    kernels::device_gelu_backward(d_dy.data(), d_x.data(), d_dy.data(), n);  // dx aliases dy
    ASSERT_TRUE(bitwise_equal(got, d_dy.download())) << "in place differs";
    std::vector<T> want(x.size());
    kernels::gelu_backward_reference(want.data(), x.data(), dy.data(), n);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double tol = 16.0 * eps * std::abs(static_cast<double>(dy[i]));
      ASSERT_LE(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])), tol)
          << "index " << i << ", x " << x[i] << ": reference " << want[i] << ", device " << got[i];
    }
  }
}

// One IEEE addition per element, as the host loop does: bitwise equal.
TYPED_TEST(CudaActivationsTest, AddIntoMatchesHostBitwise) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (std::int64_t n : kCounts) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const std::vector<T> x = random_values<T>(n, 8), y0 = random_values<T>(n, 9);
    std::vector<std::vector<T>> runs;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> d_y = to_device(y0), d_x = to_device(x);
      kernels::device_add_into(d_y.data(), d_x.data(), n);
      runs.push_back(d_y.download());
    }
    std::vector<T> want(y0.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = y0[i] + x[i];
    EXPECT_TRUE(bitwise_equal(runs[0], runs[1])) << "two runs differ";
    EXPECT_TRUE(bitwise_equal(want, runs[0])) << ::dtw::testing::compare(0, want, runs[0]);
  }
}

// Size 0 launches nothing: NaN-poisoned buffers stay bitwise as they were.
TYPED_TEST(CudaActivationsTest, ZeroSizesTouchNothing) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const std::vector<T> poison = nan_vector<T>(4);
  DeviceArray<T> a = to_device(poison), b = to_device(poison);
  kernels::device_bias_add(a.data(), b.data(), 0, 4);
  kernels::device_bias_add(a.data(), b.data(), 4, 0);
  kernels::device_bias_backward(a.data(), b.data(), 0, 4);
  kernels::device_gelu_forward(a.data(), b.data(), 0);
  kernels::device_gelu_backward(a.data(), b.data(), b.data(), 0);
  kernels::device_add_into(a.data(), b.data(), 0);
  EXPECT_TRUE(bitwise_equal(poison, a.download()));
}

// Checked before any CUDA call, so these pass without a GPU too.
TYPED_TEST(CudaActivationsTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  expect_invalid([&] { kernels::device_bias_add(&v, &v, -3, 1); }, {"device_bias_add", "rows -3"});
  expect_invalid([&] { kernels::device_bias_add(&v, &v, 1, -4); }, {"device_bias_add", "cols -4"});
  expect_invalid([&] { kernels::device_bias_backward(&v, &v, -6, 2); },
                 {"device_bias_backward", "rows -6"});
  expect_invalid([&] { kernels::device_bias_backward(&v, &v, 2, -5); },
                 {"device_bias_backward", "cols -5"});
  expect_invalid([&] { kernels::device_gelu_forward(&v, &v, -7); },
                 {"device_gelu_forward", "n -7"});
  expect_invalid([&] { kernels::device_gelu_backward(&v, &v, &v, -9); },
                 {"device_gelu_backward", "n -9"});
  expect_invalid([&] { kernels::device_add_into(&v, &v, -11); }, {"device_add_into", "n -11"});
}

}  // namespace
}  // namespace dtw::kernel_test
