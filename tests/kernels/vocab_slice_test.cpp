// A vocabulary slice's embedding and cross-entropy pieces (Kokkos kernels)
// against their plain-loop references, bit for bit; by hand; two slices
// combined as the seams combine them equal the fused cross-entropy over the
// whole vocabulary; the checks; the Place overloads; many threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/vocab_slice.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

struct Case {
  std::int64_t rows, cols, v0;  // the slice [v0, v0 + cols) of a vocabulary of kVocab
};
constexpr std::int64_t kVocab = 40;
constexpr Case kCases[] = {{0, 1, 0}, {1, 1, 0}, {5, 40, 0}, {7, 13, 20}, {64, 3, 37}, {9, 300, 0}};

template <class T>
class VocabSliceTest : public ::testing::Test {};
TYPED_TEST_SUITE(VocabSliceTest, RealTypes);

// The outputs of every kernel of the family on one case, host kernel or reference.
template <class T>
std::vector<std::vector<T>> run_all(const Case& c, std::uint64_t key, bool reference) {
  namespace k = kernels;
  const std::int64_t V = std::max(kVocab, c.v0 + c.cols), dim = 5;
  const auto ids = random_indices(c.rows, V, key);  // some in the slice, some not
  const auto table = random_values<T>(c.cols * dim, key + 1);
  const auto dout = random_values<T>(c.rows * dim, key + 2);
  const auto logits = random_values<T>(c.rows * c.cols, key + 3, 3.0);
  std::vector<T> out(c.rows * dim, T(-9)), dtable = random_values<T>(c.cols * dim, key + 4),
                                           max(c.rows), sums(2 * c.rows), probs(c.rows * c.cols),
                                           losses(c.rows), dlogits(c.rows * c.cols);
  const T dloss = T(0.375);
  if (reference) {
    k::vocab_embedding_forward_reference(out.data(), ids.data(), table.data(), c.rows, dim, c.v0,
                                         c.v0 + c.cols);
    k::vocab_embedding_backward_reference(dtable.data(), ids.data(), dout.data(), c.rows, dim, c.v0,
                                          c.v0 + c.cols);
    k::vocab_row_max_reference(max.data(), logits.data(), c.rows, c.cols);
    k::vocab_exp_sums_reference(sums.data(), logits.data(), max.data(), ids.data(), c.rows, c.cols,
                                c.v0);
    const T mean = k::vocab_cross_entropy_reference(probs.data(), losses.data(), logits.data(),
                                                    max.data(), sums.data(), c.rows, c.cols);
    k::vocab_cross_entropy_backward_reference(dlogits.data(), probs.data(), ids.data(), c.rows,
                                              c.cols, c.v0, dloss);
    return {out, dtable, max, sums, probs, losses, dlogits, {mean}};
  }
  k::vocab_embedding_forward(out.data(), ids.data(), table.data(), c.rows, dim, c.v0,
                             c.v0 + c.cols);
  k::vocab_embedding_backward(dtable.data(), ids.data(), dout.data(), c.rows, dim, c.v0,
                              c.v0 + c.cols);
  k::vocab_row_max(max.data(), logits.data(), c.rows, c.cols);
  k::vocab_exp_sums(sums.data(), logits.data(), max.data(), ids.data(), c.rows, c.cols, c.v0);
  const T mean = k::vocab_cross_entropy(probs.data(), losses.data(), logits.data(), max.data(),
                                        sums.data(), c.rows, c.cols);
  k::vocab_cross_entropy_backward(dlogits.data(), probs.data(), ids.data(), c.rows, c.cols, c.v0,
                                  dloss);
  return {out, dtable, max, sums, probs, losses, dlogits, {mean}};
}

TYPED_TEST(VocabSliceTest, MatchesReferenceBitwise) {
  // The same operations in T in the same order: the model's figures depend on it.
  const char* names[] = {
      "embedding_forward",      "embedding_backward", "row_max", "exp_sums", "probs", "losses",
      "cross_entropy_backward", "mean loss"};
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "rows " << c.rows << " slice [" << c.v0 << ", " << c.v0 + c.cols << ")");
    const auto got = run_all<TypeParam>(c, 7, false), want = run_all<TypeParam>(c, 7, true);
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(bitwise_equal(got[i], want[i]))
          << names[i] << ": " << testing::compare(0, want[i], got[i]);
  }
}

TYPED_TEST(VocabSliceTest, TheLookupTakesOnlyTheSlicesRows) {
  using T = TypeParam;
  // Slice [2, 4) of the vocabulary; rows of dim 2.
  const std::vector<T> table{T(1), T(2), T(3), T(4)};
  const std::vector<std::int32_t> ids{3, 0, 2, 5, 3};
  std::vector<T> out(10, std::numeric_limits<T>::quiet_NaN());
  kernels::vocab_embedding_forward(out.data(), ids.data(), table.data(), 5, 2, 2, 4);
  EXPECT_EQ(out, (std::vector<T>{3, 4, 0, 0, 1, 2, 0, 0, 3, 4}));
  const std::vector<T> dout{T(1), T(2), T(10), T(20), T(100), T(200), T(1000), T(2000), T(5), T(6)};
  std::vector<T> dtable{T(0.5), T(0.5), T(0.25), T(0.25)};
  kernels::vocab_embedding_backward(dtable.data(), ids.data(), dout.data(), 5, 2, 2, 4);
  // Row 0 (id 2) gets token 2; row 1 (id 3) tokens 0 and 4; ids 0 and 5 are another slice's.
  EXPECT_EQ(dtable, (std::vector<T>{T(100.5), T(200.5), T(6.25), T(8.25)}));
}

TYPED_TEST(VocabSliceTest, TwoSlicesCombinedEqualTheWholeVocabulary) {
  // What Seams::vocab_max and vocab_sum do between the pieces, by hand.
  using T = TypeParam;
  const std::int64_t rows = 6, V = 11, split = 4;
  const auto logits = random_values<T>(rows * V, 20, 2.0);
  const auto targets = random_indices(rows, V, 21);
  std::vector<T> part[2] = {std::vector<T>(rows * split), std::vector<T>(rows * (V - split))};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < V; ++j)
      (j < split ? part[0][r * split + j] : part[1][r * (V - split) + j - split]) =
          logits[r * V + j];
  const std::int64_t cols[2] = {split, V - split}, v0[2] = {0, split};
  std::vector<T> max[2] = {std::vector<T>(rows), std::vector<T>(rows)};
  for (int s = 0; s < 2; ++s) kernels::vocab_row_max(max[s].data(), part[s].data(), rows, cols[s]);
  for (std::int64_t r = 0; r < rows; ++r) max[0][r] = max[1][r] = std::max(max[0][r], max[1][r]);
  std::vector<T> sums[2] = {std::vector<T>(2 * rows), std::vector<T>(2 * rows)};
  for (int s = 0; s < 2; ++s)
    kernels::vocab_exp_sums(sums[s].data(), part[s].data(), max[s].data(), targets.data(), rows,
                            cols[s], v0[s]);
  for (std::int64_t i = 0; i < 2 * rows; ++i) sums[0][i] = sums[1][i] = sums[0][i] + sums[1][i];
  std::vector<T> probs[2] = {std::vector<T>(rows * split), std::vector<T>(rows * (V - split))};
  std::vector<T> losses(rows), whole_probs(rows * V), whole_losses(rows);
  T mean = 0;
  for (int s = 0; s < 2; ++s)
    mean = kernels::vocab_cross_entropy(probs[s].data(), losses.data(), part[s].data(),
                                        max[s].data(), sums[s].data(), rows, cols[s]);
  const T whole = kernels::cross_entropy_forward(whole_probs.data(), whole_losses.data(),
                                                 logits.data(), targets.data(), rows, V);
  // Sums in T in another order than the fused kernel's double sums: a few ulp of T.
  const double tol = 16 * std::numeric_limits<T>::epsilon();
  EXPECT_NEAR(mean, whole, tol * std::abs(whole));
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(losses[r], whole_losses[r], tol * (1 + std::abs(whole_losses[r]))) << "row " << r;
    for (std::int64_t j = 0; j < V; ++j) {
      const T p = j < split ? probs[0][r * split + j] : probs[1][r * (V - split) + j - split];
      EXPECT_NEAR(p, whole_probs[r * V + j], tol) << "row " << r << " column " << j;
    }
  }
}

TYPED_TEST(VocabSliceTest, BadSizesAreInvalidArguments) {
  using T = TypeParam;
  std::vector<T> a(8), b(8), c(8);
  const std::vector<std::int32_t> ids(8, 0);
  expect_invalid(
      [&] { kernels::vocab_embedding_forward(a.data(), ids.data(), b.data(), -1, 2, 0, 4); },
      {"vocab_embedding_forward", "n -1"});
  expect_invalid(
      [&] { kernels::vocab_embedding_backward(a.data(), ids.data(), b.data(), 2, 2, 5, 3); },
      {"vocab_embedding_backward", "[5, 3)"});
  expect_invalid([&] { kernels::vocab_row_max(a.data(), b.data(), 2, 0); },
                 {"vocab_row_max", "cols 0"});
  expect_invalid(
      [&] { kernels::vocab_exp_sums(a.data(), b.data(), c.data(), ids.data(), -3, 2, 0); },
      {"vocab_exp_sums", "rows -3"});
  expect_invalid(
      [&] {
        kernels::vocab_cross_entropy(a.data(), b.data(), c.data(), c.data(), c.data(), 1, -2);
      },
      {"vocab_cross_entropy", "cols -2"});
  expect_invalid(
      [&] {
        kernels::vocab_cross_entropy_backward(kernels::Place::host(), a.data(), b.data(),
                                              ids.data(), 1, 0, 0, T(1));
      },
      {"vocab_cross_entropy_backward", "cols 0"});
}

TYPED_TEST(VocabSliceTest, OnTheHostPlaceTheOverloadsGiveTheHostKernelsBits) {
  using T = TypeParam;
  const kernels::Place host = kernels::Place::host();
  const std::int64_t rows = 9, cols = 7, v0 = 3, dim = 4;
  const auto ids = random_indices(rows, 12, 30);
  const auto logits = random_values<T>(rows * cols, 31), table = random_values<T>(cols * dim, 32);
  std::vector<T> out1(rows * dim), out2(rows * dim), dt1(cols * dim), dt2(cols * dim), m1(rows),
      m2(rows), s1(2 * rows), s2(2 * rows), p1(rows * cols), p2(rows * cols), l1(rows), l2(rows),
      d1(rows * cols), d2(rows * cols);
  kernels::vocab_embedding_forward(out1.data(), ids.data(), table.data(), rows, dim, v0, v0 + cols);
  kernels::vocab_embedding_forward(host, out2.data(), ids.data(), table.data(), rows, dim, v0,
                                   v0 + cols);
  kernels::vocab_embedding_backward(dt1.data(), ids.data(), out1.data(), rows, dim, v0, v0 + cols);
  kernels::vocab_embedding_backward(host, dt2.data(), ids.data(), out1.data(), rows, dim, v0,
                                    v0 + cols);
  kernels::vocab_row_max(m1.data(), logits.data(), rows, cols);
  kernels::vocab_row_max(host, m2.data(), logits.data(), rows, cols);
  kernels::vocab_exp_sums(s1.data(), logits.data(), m1.data(), ids.data(), rows, cols, v0);
  kernels::vocab_exp_sums(host, s2.data(), logits.data(), m1.data(), ids.data(), rows, cols, v0);
  const T mean1 = kernels::vocab_cross_entropy(p1.data(), l1.data(), logits.data(), m1.data(),
                                               s1.data(), rows, cols);
  const T mean2 = kernels::vocab_cross_entropy(host, p2.data(), l2.data(), logits.data(), m1.data(),
                                               s1.data(), rows, cols);
  kernels::vocab_cross_entropy_backward(d1.data(), p1.data(), ids.data(), rows, cols, v0, T(0.5));
  kernels::vocab_cross_entropy_backward(host, d2.data(), p1.data(), ids.data(), rows, cols, v0,
                                        T(0.5));
  EXPECT_TRUE(bitwise_equal(out1, out2) && bitwise_equal(dt1, dt2) && bitwise_equal(m1, m2) &&
              bitwise_equal(s1, s2) && bitwise_equal(p1, p2) && bitwise_equal(l1, l2) &&
              bitwise_equal(d1, d2));
  EXPECT_EQ(mean1, mean2);
}

TYPED_TEST(VocabSliceTest, ADevicePlaceTheMachineCannotServeIsAClearError) {
  using T = TypeParam;
  std::vector<T> a(4, T(1)), b(4, T(2));
  try {
    kernels::vocab_row_max(kernels::Place::cuda(99), a.data(), b.data(), 2, 2);
    FAIL() << "vocab_row_max on cuda:99 returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("kernels::vocab_row_max on cuda:99"));
  }
  EXPECT_EQ(a, std::vector<T>(4, T(1))) << "the host memory was touched";
}

TYPED_TEST(VocabSliceTest, ManyThreadsGiveTheLoneCallsBits) {
  expect_concurrent_matches_serial([](int t) {
    return run_all<TypeParam>({33, 150, 5}, 40 + t, false);
  });
}

}  // namespace
}  // namespace dtw::kernel_test
