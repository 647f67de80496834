// The CUDA fused softmax cross-entropy against cross_entropy.h's reference:
// float and double, vocabularies of 1 and of 50257, odd sizes and more rows
// than the grid's block cap (70000 x 3). Every output starts as NaN and every
// element is checked within a bound derived from the arithmetic; a second
// call must give the same bits. Out-of-range targets: the forward call throws
// naming the row, the target and vocab; the backward call marks the row NaN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/cuda_cross_entropy.h"
#include "gpu_test.h"
#include "kernel_test_util.h"
#include "row_kernel_check.h"

namespace dtw {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_invalid;
using kernel_test::random_indices;
using kernel_test::random_values;
using testing::DeviceArray;
using testing::to_device;
using testing::poisoned;
using testing::sum_bound;
using testing::unit_roundoff;
using testing::kExpUlps;
using testing::within;

struct Shape {
  std::int64_t rows, vocab;
};
const std::vector<Shape> kShapes = {{1, 1}, {1, 1000}, {7, 1}, {3, 257}, {33, 4097},
                                    {70000, 3}, {300, 50257}};


template <class T>
void check_forward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.vocab;
  const auto logits = random_values<T>(n, key, 3.0);
  const auto targets = random_indices(s.rows, s.vocab, key + 1);
  std::vector<T> probs(n), losses(s.rows);
  const T mean = kernels::cross_entropy_forward_reference(probs.data(), losses.data(),
                                                          logits.data(), targets.data(), s.rows,
                                                          s.vocab);
  auto d_logits = to_device(logits);
  auto d_targets = to_device(targets);
  std::vector<T> got_probs[2], got_losses[2];
  T got_mean[2];
  for (int k = 0; k < 2; ++k) {
    auto d_probs = poisoned<T>(n), d_losses = poisoned<T>(s.rows);
    got_mean[k] = kernels::device_cross_entropy_forward(d_probs.data(), d_losses.data(),
                                                        d_logits.data(), d_targets.data(), s.rows,
                                                        s.vocab);
    got_probs[k] = d_probs.download(), got_losses[k] = d_losses.download();
  }
  // probs: as softmax (cuda_softmax_test.cpp): e_c = 2·(2·kExpUlps·u +
  // u·|x − max|) for term c's exponential on both sides, E the largest e_c
  // (the sum's relative error, plus 2γ for the two sums' orders), 4u for 1/S
  // and the product, the reference's division and cast. loss = (m − x_t) + log S in double: log S moves by
  // the sum's relative error δ_S = E + 2γ, the double ops add a few double
  // roundings of |m − x_t| + |log S|, and both sides round the loss to T (2u).
  // The mean: the mean of those, plus its rows' sums' orders (2γ_rows) and the
  // two roundings of the mean to T.
  const double u = unit_roundoff<T>(), ud = unit_roundoff<double>();
  const double sb = 2 * sum_bound(s.vocab);
  std::vector<double> tol_probs(n), tol_losses(s.rows);
  double tol_sum = 0, abs_loss_sum = 0;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* lr = logits.data() + r * s.vocab;
    const double max = *std::max_element(lr, lr + s.vocab);
    const double big_e = 2 * (2 * kExpUlps<T> * u + u * (max - *std::min_element(lr, lr + s.vocab)));
    double sum = 0;
    for (std::int64_t c = 0; c < s.vocab; ++c) {
      const double e = 2 * (2 * kExpUlps<T> * u + u * (max - lr[c]));
      tol_probs[r * s.vocab + c] =
          std::fabs(double(probs[r * s.vocab + c])) * (e + big_e + sb + 4 * u);
      sum += std::exp(double(lr[c]) - max);
    }
    const double spread = std::fabs(max - lr[targets[r]]) + std::fabs(std::log(sum));
    tol_losses[r] = big_e + sb + 2 * u * std::fabs(double(losses[r])) + 4 * ud * spread;
    tol_sum += tol_losses[r], abs_loss_sum += std::fabs(double(losses[r]));
  }
  const double rows = double(s.rows);
  const std::vector<double> tol_mean = {tol_sum / rows + 2 * sum_bound(s.rows) * abs_loss_sum / rows +
                                        2 * u * std::fabs(double(mean))};
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " vocab " << s.vocab);
  EXPECT_EQ(within("probs", got_probs[0], probs, tol_probs), "");
  EXPECT_EQ(within("losses", got_losses[0], losses, tol_losses), "");
  EXPECT_EQ(within("mean", std::vector<T>{got_mean[0]}, std::vector<T>{mean}, tol_mean), "");
  EXPECT_TRUE(bitwise_equal(got_probs[0], got_probs[1])) << "probs, second call";
  EXPECT_TRUE(bitwise_equal(got_losses[0], got_losses[1])) << "losses, second call";
  EXPECT_TRUE(bitwise_equal(std::vector<T>{got_mean[0]}, std::vector<T>{got_mean[1]})) << "mean";
  // probs aliasing logits: the same bits.
  auto d_losses = poisoned<T>(s.rows);
  const T alias_mean = kernels::device_cross_entropy_forward(
      d_logits.data(), d_losses.data(), d_logits.data(), d_targets.data(), s.rows, s.vocab);
  EXPECT_TRUE(bitwise_equal(d_logits.download(), got_probs[0])) << "probs aliasing logits";
  EXPECT_TRUE(bitwise_equal(std::vector<T>{alias_mean}, std::vector<T>{got_mean[0]}));
}

template <class T>
void check_backward(Shape s, std::uint64_t key) {
  const std::int64_t n = s.rows * s.vocab;
  const auto logits = random_values<T>(n, key, 3.0);
  const auto targets = random_indices(s.rows, s.vocab, key + 1);
  std::vector<T> probs(n), losses(s.rows), dlogits(n);
  kernels::cross_entropy_forward_reference(probs.data(), losses.data(), logits.data(),
                                           targets.data(), s.rows, s.vocab);
  const T dloss = T(1) / static_cast<T>(s.rows);
  kernels::cross_entropy_backward_reference(dlogits.data(), probs.data(), targets.data(), s.rows,
                                            s.vocab, dloss);
  auto d_probs = to_device(probs);
  auto d_targets = to_device(targets);
  std::vector<T> got[2];
  for (auto& out : got) {
    auto d_dlogits = poisoned<T>(n);
    kernels::device_cross_entropy_backward(d_dlogits.data(), d_probs.data(), d_targets.data(),
                                           s.rows, s.vocab, dloss);
    out = d_dlogits.download();
  }
  // dloss·(p − onehot): each side rounds p − 1 (target only) and the product,
  // the reference in double then once more to T (in float its double ops are
  // negligible): at most 4u of |dloss|·(|p| + onehot).
  const double u = unit_roundoff<T>();
  std::vector<double> tol(n);
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t c = 0; c < s.vocab; ++c) {
      const double onehot = c == targets[r] ? 1.0 : 0.0;
      tol[r * s.vocab + c] =
          4 * u * std::fabs(double(dloss)) * (std::fabs(double(probs[r * s.vocab + c])) + onehot);
    }
  const char* type = sizeof(T) == 4 ? "float" : "double";
  SCOPED_TRACE(::testing::Message() << type << " rows " << s.rows << " vocab " << s.vocab);
  EXPECT_EQ(within("dlogits", got[0], dlogits, tol), "");
  EXPECT_TRUE(bitwise_equal(got[0], got[1])) << "second call";
  kernels::device_cross_entropy_backward(d_probs.data(), d_probs.data(), d_targets.data(), s.rows,
                                         s.vocab, dloss);
  EXPECT_TRUE(bitwise_equal(d_probs.download(), got[0])) << "dlogits aliasing probs";
}

TEST(CudaCrossEntropyTest, ForwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 500;
  for (Shape s : kShapes) check_forward<float>(s, key += 2), check_forward<double>(s, key += 2);
}

TEST(CudaCrossEntropyTest, BackwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 600;
  for (Shape s : kShapes) check_backward<float>(s, key += 2), check_backward<double>(s, key += 2);
}

// Rows 3 and 4 of 5 have targets 7 (= vocab) and -1. The forward call throws
// naming the first bad row; the backward call fills rows 3 and 4 with NaN and
// still gets rows 0-2 right, within the 4u bound of check_backward.
TEST(CudaCrossEntropyTest, OutOfRangeTargets) {
  DTW_REQUIRE_GPUS(1);
  const std::int64_t rows = 5, vocab = 7;
  const auto logits = random_values<float>(rows * vocab, 700);
  const std::vector<std::int32_t> targets = {0, 6, 3, 7, -1};
  auto d_logits = to_device(logits);
  auto d_targets = to_device(targets);
  auto d_probs = poisoned<float>(rows * vocab), d_losses = poisoned<float>(rows);
  expect_invalid(
      [&] {
        kernels::device_cross_entropy_forward(d_probs.data(), d_losses.data(), d_logits.data(),
                                              d_targets.data(), rows, vocab);
      },
      {"device_cross_entropy_forward", "row 3", "target 7", "outside [0, 7)"});
  const std::int64_t good = 3;
  std::vector<float> probs(rows * vocab), losses(good), dlogits(good * vocab);
  kernels::cross_entropy_forward_reference(probs.data(), losses.data(), logits.data(),
                                           targets.data(), good, vocab);
  kernels::cross_entropy_backward_reference(dlogits.data(), probs.data(), targets.data(), good,
                                            vocab, 0.5f);
  d_probs.upload(probs);
  auto d_dlogits = poisoned<float>(rows * vocab);
  kernels::device_cross_entropy_backward(d_dlogits.data(), d_probs.data(), d_targets.data(), rows,
                                         vocab, 0.5f);
  const auto got = d_dlogits.download();
  std::vector<double> tol(good * vocab);
  for (std::int64_t i = 0; i < good * vocab; ++i)
    tol[i] = 4 * unit_roundoff<float>() * 0.5 * (std::fabs(double(probs[i])) + 1.0);
  EXPECT_EQ(within("good rows", std::vector<float>(got.begin(), got.begin() + good * vocab),
                   dlogits, tol),
            "");
  for (std::int64_t i = good * vocab; i < rows * vocab; ++i)
    EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " of a bad row: " << got[i];
}

// No GPU needed: the sizes are checked before any CUDA call, and no rows
// launch nothing (the forward call returns 0 without waiting on anything).
TEST(CudaCrossEntropyTest, RejectsNegativeSizes) {
  float* p = nullptr;
  const std::int32_t* t = nullptr;
  expect_invalid([&] { kernels::device_cross_entropy_forward(p, p, p, t, -1, 10); },
                 {"device_cross_entropy_forward", "rows -1", "vocab 10"});
  expect_invalid([&] { kernels::device_cross_entropy_backward(p, p, t, 4, -2, 1.0f); },
                 {"device_cross_entropy_backward", "rows 4", "vocab -2"});
}

TEST(CudaCrossEntropyTest, NoRowsLaunchNothing) {
  double* p = nullptr;
  const std::int32_t* t = nullptr;
  EXPECT_EQ(kernels::device_cross_entropy_forward(p, p, p, t, 0, 10), 0.0);
  kernels::device_cross_entropy_backward(p, p, t, 0, 10, 1.0);
  kernels::device_cross_entropy_backward(p, p, t, 3, 0, 1.0);
}

}  // namespace
}  // namespace dtw
