// cross_entropy_forward/backward (Kokkos kernels) against their plain-loop
// references, finite differences, huge logits, bad targets, and many threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "dtw/kernels/cross_entropy.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

struct Shape {
  std::int64_t rows, vocab;
};
constexpr Shape kShapes[] = {{0, 0}, {0, 5}, {1, 1}, {7, 13}, {64, 257}, {3, 1000}};

template <class T>
class CrossEntropyTest : public ::testing::Test {};
TYPED_TEST_SUITE(CrossEntropyTest, RealTypes);

TYPED_TEST(CrossEntropyTest, MatchesReference) {
  using T = TypeParam;
  const double eps = std::numeric_limits<T>::epsilon();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.vocab);
    const auto n = static_cast<std::size_t>(s.rows * s.vocab);
    const std::vector<T> logits = random_values<T>(s.rows * s.vocab, 1, 3.0);
    const std::vector<std::int32_t> targets = random_indices(s.rows, s.vocab, 2);
    std::vector<T> probs(n), probs_ref(n), losses(targets.size()), losses_ref(targets.size());
    const T mean = kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(),
                                                  targets.data(), s.rows, s.vocab);
    const T mean_ref = kernels::cross_entropy_forward_reference(
        probs_ref.data(), losses_ref.data(), logits.data(), targets.data(), s.rows, s.vocab);
    double mean_tol = 0;
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const std::size_t row = static_cast<std::size_t>(r * s.vocab);
      const T max = *std::max_element(logits.begin() + static_cast<std::ptrdiff_t>(row),
                                      logits.begin() + static_cast<std::ptrdiff_t>(row) + s.vocab);
      // A prob errs as in softmax: x − max rounded in T (|x − max|/2 ulp
      // relative after exp), exp (≤ 1.22 ulp in float), 1/sum, product: within
      // (3 + |x − max|/2) ulp; the
      // sums in double differ by up to vocab ulp of double.
      // log S errs by the weighted sum of the summed terms' errors (each term
      // has all but the last two roundings), the loss by that plus its rounding.
      double log_sum_tol = static_cast<double>(s.vocab) * kDoubleEps;
      for (std::int64_t c = 0; c < s.vocab; ++c) {
        const std::size_t i = row + static_cast<std::size_t>(c);
        const double gap = std::abs(static_cast<double>(logits[i]) - static_cast<double>(max));
        const double tol = (3 + gap / 2) * eps + static_cast<double>(s.vocab) * kDoubleEps;
        ASSERT_NEAR(probs[i], probs_ref[i], tol * std::abs(probs_ref[i])) << "index " << i;
        log_sum_tol += (1 + gap / 2) * eps * static_cast<double>(probs_ref[i]);
      }
      const double loss_tol = log_sum_tol + eps * std::abs(losses_ref[static_cast<std::size_t>(r)]);
      ASSERT_NEAR(losses[static_cast<std::size_t>(r)], losses_ref[static_cast<std::size_t>(r)],
                  loss_tol)
          << "row " << r;
      mean_tol += loss_tol / static_cast<double>(s.rows);
    }
    EXPECT_NEAR(mean, mean_ref, mean_tol + eps * std::abs(mean_ref));
    if (s.rows == 0) {
      EXPECT_EQ(mean, T(0));
    }

    // Backward from the reference probs: dloss·p in T (0.5 ulp), and for the
    // target dloss·(p − 1) with p − 1 rounded too: ≤ 1.5 ulp of each |dlogit|.
    const T dloss = T(0.37);
    std::vector<T> dlogits(n), dlogits_ref(n);
    kernels::cross_entropy_backward(dlogits.data(), probs_ref.data(), targets.data(), s.rows,
                                    s.vocab, dloss);
    kernels::cross_entropy_backward_reference(dlogits_ref.data(), probs_ref.data(), targets.data(),
                                              s.rows, s.vocab, dloss);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_NEAR(dlogits[i], dlogits_ref[i], 1.5 * eps * std::abs(dlogits_ref[i]))
          << "index " << i;
  }
}

TYPED_TEST(CrossEntropyTest, HugeLogitsStayFinite) {
  // e^(1e4) overflows any type, and the probability of a logit 2e4 below the
  // maximum rounds to 0; the loss comes from log S, so it is still exact.
  using T = TypeParam;
  const std::vector<T> logits{T(1e4), T(-1e4), T(0), T(1e4) - T(1),
                              T(1e4), T(-1e4), T(0), T(1e4) - T(1)};
  const std::vector<std::int32_t> targets{0, 1};
  std::vector<T> probs(8), losses(2);
  const T mean = kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(),
                                                targets.data(), 2, 4);
  const double log_sum = std::log1p(std::exp(-1.0));  // log(e⁰ + e⁻¹), the max subtracted
  EXPECT_EQ(probs[1], T(0));
  EXPECT_NEAR(losses[0], log_sum, 2 * std::numeric_limits<T>::epsilon());
  EXPECT_NEAR(losses[1], 2e4 + log_sum, 2e4 * std::numeric_limits<T>::epsilon());
  EXPECT_TRUE(std::isfinite(mean));
  std::vector<T> dlogits(8);
  kernels::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), 2, 4, T(0.5));
  for (T v : dlogits) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_EQ(dlogits[5], T(-0.5));  // 0.5·(0 − 1): the target's probability is 0
}

TYPED_TEST(CrossEntropyTest, BackwardOverwritesAndMayAliasProbs) {
  using T = TypeParam;
  const std::int64_t rows = 4, vocab = 19;
  const std::vector<T> logits = random_values<T>(rows * vocab, 3);
  const std::vector<std::int32_t> targets = random_indices(rows, vocab, 4);
  std::vector<T> probs(logits.size()), losses(4);
  kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), rows,
                                 vocab);
  std::vector<T> fresh(probs.size(), T(0)),
      stale(probs.size(), std::numeric_limits<T>::quiet_NaN());
  kernels::cross_entropy_backward(fresh.data(), probs.data(), targets.data(), rows, vocab, T(0.25));
  kernels::cross_entropy_backward(stale.data(), probs.data(), targets.data(), rows, vocab, T(0.25));
  EXPECT_TRUE(bitwise_equal(fresh, stale)) << testing::compare(0, fresh, stale);
  std::vector<T> in_place = probs;
  kernels::cross_entropy_backward(in_place.data(), in_place.data(), targets.data(), rows, vocab,
                                  T(0.25));
  EXPECT_TRUE(bitwise_equal(fresh, in_place)) << testing::compare(0, fresh, in_place);
}

TYPED_TEST(CrossEntropyTest, TargetOutOfRangeIsInvalidArgument) {
  using T = TypeParam;
  const std::vector<T> logits(3 * 5, T(0));
  std::vector<T> probs(logits.size()), losses(3), dlogits(logits.size());
  const std::vector<std::int32_t> too_big{0, 4, 5}, negative{-1, 0, 0};
  expect_invalid(
      [&] {
        kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(), too_big.data(),
                                       3, 5);
      },
      {"row 2", "target 5", "[0, 5)"});
  expect_invalid(
      [&] {
        kernels::cross_entropy_forward_reference(probs.data(), losses.data(), logits.data(),
                                                 negative.data(), 3, 5);
      },
      {"row 0", "target -1"});
  expect_invalid(
      [&] {
        kernels::cross_entropy_backward(dlogits.data(), probs.data(), negative.data(), 3, 5, T(1));
      },
      {"row 0", "target -1"});
  expect_invalid(
      [&] {
        kernels::cross_entropy_backward_reference(dlogits.data(), probs.data(), too_big.data(), 3,
                                                  5, T(1));
      },
      {"row 2", "target 5"});
}

TYPED_TEST(CrossEntropyTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  const std::int32_t target = 0;
  expect_invalid([&] { kernels::cross_entropy_forward(&v, &v, &v, &target, -3, 1); }, {"rows -3"});
  expect_invalid([&] { kernels::cross_entropy_forward_reference(&v, &v, &v, &target, 1, -4); },
                 {"vocab -4"});
  expect_invalid([&] { kernels::cross_entropy_backward(&v, &v, &target, 1, -5, T(1)); },
                 {"vocab -5"});
  expect_invalid([&] { kernels::cross_entropy_backward_reference(&v, &v, &target, -6, 1, T(1)); },
                 {"rows -6"});
}

TEST(CrossEntropyGradientTest, MatchesFiniteDifferences) {
  // L = dloss·Σ losses = dloss·rows·mean, whose gradient backward gives for that dloss.
  const std::int64_t rows = 4, vocab = 7;
  const double dloss = 0.37;
  std::vector<double> logits = testing::random_vector(rows * vocab, 5, 2.0);
  const std::vector<std::int32_t> targets = random_indices(rows, vocab, 6);
  std::vector<double> probs(logits.size()), losses(4), dlogits(logits.size());
  const auto loss = [&] {
    return dloss * static_cast<double>(rows) *
           kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(),
                                          targets.data(), rows, vocab);
  };
  loss();
  kernels::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), rows, vocab, dloss);
  EXPECT_TRUE(
      testing::gradients_match("dlogits", dlogits, testing::numeric_gradient(logits, loss)));
}

TEST(CrossEntropyConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kRows = 16, kVocab = 65;
#else
  constexpr std::int64_t kRows = 256, kVocab = 513;
#endif
  // Each thread runs forward and backward on its own data; the results must
  // equal a lone call's bit for bit.
  expect_concurrent_matches_serial([](int t) {
    const auto key = static_cast<std::uint64_t>(100 + 10 * t);
    const std::vector<float> logits = random_values<float>(kRows * kVocab, key, 3.0);
    const std::vector<std::int32_t> targets = random_indices(kRows, kVocab, key + 1);
    std::vector<float> probs(logits.size()), losses(kRows), dlogits(logits.size());
    const float mean = kernels::cross_entropy_forward(probs.data(), losses.data(), logits.data(),
                                                      targets.data(), kRows, kVocab);
    kernels::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), kRows, kVocab,
                                    1.0f / kRows);
    return std::vector<std::vector<float>>{probs, losses, dlogits, {mean}};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
