// The CUDA row-wise softmax against softmax.h's reference: float and double,
// one row, one column, odd sizes, more rows than the grid's block cap
// (70000 x 3) and a vocabulary-sized row (300 x 50257). Every output starts
// as NaN and every element is checked within a bound derived from the
// arithmetic; a second call must give the same bits, and so must a call whose
// output aliases its input. The argument checks need no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtw/kernels/cuda_softmax.h"
#include "dtw/kernels/softmax.h"
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
using testing::kExpUlps;
using testing::within;

struct Shape {
  std::int64_t rows, cols;
};
const std::vector<Shape> kShapes = {{1, 1}, {1, 1000}, {7, 1}, {3, 257}, {33, 4097},
                                    {70000, 3}, {300, 50257}};


template <class T>
void check_forward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.cols;
  const auto x = random_values<T>(n, key, 3.0);
  std::vector<T> y(n);
  kernels::softmax_forward_reference(y.data(), x.data(), s.rows, s.cols);
  auto d_x = to_device(x);
  std::vector<T> got[2];
  for (auto& out : got) {
    auto d_y = poisoned<T>(n);
    kernels::device_softmax_forward(d_y.data(), d_x.data(), s.rows, s.cols);
    out = d_y.download();
  }
  // Term c's exponential on each side is off (relatively) by the exp's own
  // error, kExpUlps ulp ≤ 2·kExpUlps·u, plus u·|x − max| from rounding x − max
  // (d e^z = e^z dz): twice that for the two sides, e_c (the reference works
  // in double, so in float its share is far smaller, but in double it is not).
  // The sum of these positive terms is then off by at most the largest term's
  // error (E), plus the two sums' orders (2γ_cols). Then 1/sum and the product
  // round on the device, the division and the cast to T on the reference: 4u.
  // So y is off by y·(e_c + E + 2γ + 4u).
  const double u = unit_roundoff<T>(), sb = 2 * sum_bound(s.cols);
  std::vector<double> tol(n);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x.data() + r * s.cols;
    const double max = *std::max_element(xr, xr + s.cols);
    const double big_e = 2 * (2 * kExpUlps<T> * u + u * (max - *std::min_element(xr, xr + s.cols)));
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const double e = 2 * (2 * kExpUlps<T> * u + u * (max - xr[c]));
      tol[r * s.cols + c] = std::fabs(double(y[r * s.cols + c])) * (e + big_e + sb + 4 * u);
    }
  }
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " cols " << s.cols);
  EXPECT_EQ(within("y", got[0], y, tol), "");
  EXPECT_TRUE(bitwise_equal(got[0], got[1])) << "second call";
  kernels::device_softmax_forward(d_x.data(), d_x.data(), s.rows, s.cols);  // y aliasing x
  EXPECT_TRUE(bitwise_equal(d_x.download(), got[0])) << "y aliasing x";
}

template <class T>
void check_backward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.cols;
  std::vector<T> y(n);
  const auto x = random_values<T>(n, key, 3.0);
  kernels::softmax_forward_reference(y.data(), x.data(), s.rows, s.cols);  // a real softmax row
  const auto dy = random_values<T>(n, key + 1);
  std::vector<T> dx(n);
  kernels::softmax_backward_reference(dx.data(), y.data(), dy.data(), s.rows, s.cols);
  auto d_y = to_device(y), d_dy = to_device(dy);
  std::vector<T> got[2];
  for (auto& out : got) {
    auto d_dx = poisoned<T>(n);
    kernels::device_softmax_backward(d_dx.data(), d_y.data(), d_dy.data(), s.rows, s.cols);
    out = d_dx.download();
  }
  // dx = y·(dy − d), d = Σ y·dy. The two dot products differ by their sums'
  // orders (2γ_cols of Σ|y·dy|) and the device rounds d to T (u·|d|); then
  // dy − d and the product round in T, the reference's dy − d, product and
  // cast to T: at most 6 roundings of y·(|dy| + |d|), 6u.
  const double u = unit_roundoff<T>(), sb = 2 * sum_bound(s.cols);
  std::vector<double> tol(n);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double dot = 0, abs_dot = 0;
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const double p = double(y[r * s.cols + c]) * double(dy[r * s.cols + c]);
      dot += p, abs_dot += std::fabs(p);
    }
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const std::int64_t i = r * s.cols + c;
      tol[i] = std::fabs(double(y[i])) *
               (6 * u * (std::fabs(double(dy[i])) + std::fabs(dot)) + sb * abs_dot);
    }
  }
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " cols " << s.cols);
  EXPECT_EQ(within("dx", got[0], dx, tol), "");
  EXPECT_TRUE(bitwise_equal(got[0], got[1])) << "second call";
  kernels::device_softmax_backward(d_dy.data(), d_y.data(), d_dy.data(), s.rows, s.cols);
  EXPECT_TRUE(bitwise_equal(d_dy.download(), got[0])) << "dx aliasing dy";
}

TEST(CudaSoftmaxTest, ForwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 300;
  for (Shape s : kShapes) check_forward<float>(s, key++), check_forward<double>(s, key++);
}

TEST(CudaSoftmaxTest, BackwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 400;
  for (Shape s : kShapes) check_backward<float>(s, key += 2), check_backward<double>(s, key += 2);
}

// No GPU needed: the sizes are checked before any CUDA call, and an empty
// matrix launches nothing (null pointers are never touched).
TEST(CudaSoftmaxTest, RejectsNegativeSizes) {
  float* p = nullptr;
  expect_invalid([&] { kernels::device_softmax_forward(p, p, -1, 8); },
                 {"device_softmax_forward", "rows -1", "cols 8"});
  expect_invalid([&] { kernels::device_softmax_backward(p, p, p, 2, -3); },
                 {"device_softmax_backward", "rows 2", "cols -3"});
}

TEST(CudaSoftmaxTest, EmptyLaunchesNothing) {
  double* p = nullptr;
  kernels::device_softmax_forward(p, p, 0, 8);
  kernels::device_softmax_forward(p, p, 5, 0);
  kernels::device_softmax_backward(p, p, p, 0, 8);
  kernels::device_softmax_backward(p, p, p, 5, 0);
}

}  // namespace
}  // namespace dtw
