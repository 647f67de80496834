// embedding_forward/backward (Kokkos kernels) against their plain-loop
// references, finite differences with repeated ids, bad ids, and many threads.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "dtw/kernels/embedding.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

struct Shape {
  std::int64_t n, dim, table_rows;
};
// n > table_rows repeats ids; dim 300 spans three of the backward's column strips.
constexpr Shape kShapes[] = {{0, 0, 0},  {0, 4, 3},     {3, 0, 2},   {1, 1, 1},
                             {7, 13, 5}, {64, 257, 50}, {40, 300, 7}};

template <class T>
class EmbeddingTest : public ::testing::Test {};
TYPED_TEST_SUITE(EmbeddingTest, RealTypes);

TYPED_TEST(EmbeddingTest, MatchesReference) {
  // A copy, an add, and sums in id order in both: bitwise equal.
  using T = TypeParam;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << "n " << s.n << " dim " << s.dim << " rows " << s.table_rows);
    const std::vector<T> table = random_values<T>(s.table_rows * s.dim, 1);
    const std::vector<std::int32_t> ids = random_indices(s.n, s.table_rows, 2);
    for (bool accumulate : {false, true}) {
      std::vector<T> out = random_values<T>(s.n * s.dim, 3), out_ref = out;
      kernels::embedding_forward(out.data(), ids.data(), table.data(), s.n, s.dim, s.table_rows,
                                 accumulate);
      kernels::embedding_forward_reference(out_ref.data(), ids.data(), table.data(), s.n, s.dim,
                                           s.table_rows, accumulate);
      EXPECT_TRUE(bitwise_equal(out_ref, out))
          << "accumulate " << accumulate << ": " << testing::compare(0, out_ref, out);
    }
    const std::vector<T> dout = random_values<T>(s.n * s.dim, 4);
    std::vector<T> dtable = random_values<T>(s.table_rows * s.dim, 5), dtable_ref = dtable;
    kernels::embedding_backward(dtable.data(), ids.data(), dout.data(), s.n, s.dim, s.table_rows);
    kernels::embedding_backward_reference(dtable_ref.data(), ids.data(), dout.data(), s.n, s.dim,
                                          s.table_rows);
    EXPECT_TRUE(bitwise_equal(dtable_ref, dtable)) << testing::compare(0, dtable_ref, dtable);
  }
}

TYPED_TEST(EmbeddingTest, ForwardCopiesTheRowsOfTheIds) {
  // Pinned down by hand: token + position embedding in two calls.
  using T = TypeParam;
  const std::vector<T> tokens{T(1), T(2), T(10), T(20), T(100), T(200)};  // 3 rows of dim 2
  const std::vector<T> positions{T(0.5), T(0.25), T(0.125), T(0.0625)};   // 2 rows of dim 2
  const std::vector<std::int32_t> ids{2, 0}, pos{0, 1};
  std::vector<T> out(4, std::numeric_limits<T>::quiet_NaN());  // overwritten, NaN and all
  kernels::embedding_forward(out.data(), ids.data(), tokens.data(), 2, 2, 3);
  kernels::embedding_forward(out.data(), pos.data(), positions.data(), 2, 2, 2, true);
  EXPECT_EQ(out, (std::vector<T>{T(100.5), T(200.25), T(1.125), T(2.0625)}));
}

TYPED_TEST(EmbeddingTest, BackwardAccumulatesRepeatedIds) {
  using T = TypeParam;
  const std::vector<std::int32_t> ids{1, 1, 0, 1};
  const std::vector<T> dout{T(1), T(2), T(3), T(4), T(5), T(6), T(7), T(8)};  // 4 rows of dim 2
  std::vector<T> dtable{T(100), T(200), T(1000), T(2000), T(-1), T(-2)};      // 3 rows of dim 2
  kernels::embedding_backward(dtable.data(), ids.data(), dout.data(), 4, 2, 3);
  // Row 0 gets dout row 2; row 1 gets rows 0, 1 and 3 on top of what it held; row 2 nothing.
  EXPECT_EQ(dtable, (std::vector<T>{T(105), T(206), T(1011), T(2014), T(-1), T(-2)}));
}

TYPED_TEST(EmbeddingTest, IdOutOfRangeIsInvalidArgument) {
  using T = TypeParam;
  std::vector<T> table(3 * 2), out(3 * 2);
  const std::vector<std::int32_t> too_big{0, 2, 3}, negative{1, -4, 0};
  expect_invalid(
      [&] { kernels::embedding_forward(out.data(), too_big.data(), table.data(), 3, 2, 3); },
      {"index 2", "id 3", "[0, 3)"});
  expect_invalid(
      [&] {
        kernels::embedding_forward_reference(out.data(), negative.data(), table.data(), 3, 2, 3);
      },
      {"index 1", "id -4"});
  expect_invalid(
      [&] { kernels::embedding_backward(table.data(), negative.data(), out.data(), 3, 2, 3); },
      {"index 1", "id -4"});
  expect_invalid(
      [&] {
        kernels::embedding_backward_reference(table.data(), too_big.data(), out.data(), 3, 2, 3);
      },
      {"index 2", "id 3"});
}

TYPED_TEST(EmbeddingTest, NegativeSizesAreInvalidArgument) {
  using T = TypeParam;
  T v = 0;
  const std::int32_t id = 0;
  expect_invalid([&] { kernels::embedding_forward(&v, &id, &v, -3, 1, 1); }, {"n -3"});
  expect_invalid([&] { kernels::embedding_forward_reference(&v, &id, &v, 1, -4, 1); }, {"dim -4"});
  expect_invalid([&] { kernels::embedding_backward(&v, &id, &v, 1, 1, -5); }, {"table_rows -5"});
  expect_invalid([&] { kernels::embedding_backward_reference(&v, &id, &v, -6, 1, 1); }, {"n -6"});
}

TEST(EmbeddingGradientTest, MatchesFiniteDifferencesWithRepeatedIds) {
  const std::int64_t n = 12, dim = 5, table_rows = 4;  // 12 ids over 4 rows: repeats
  std::vector<double> table = testing::random_vector(table_rows * dim, 6);
  const std::vector<std::int32_t> ids = random_indices(n, table_rows, 7);
  const std::vector<double> w = testing::random_vector(n * dim, 8);
  std::vector<double> out(static_cast<std::size_t>(n * dim));
  const auto loss = [&] {
    kernels::embedding_forward(out.data(), ids.data(), table.data(), n, dim, table_rows);
    return testing::project(w, out);
  };
  std::vector<double> dtable(table.size(), 0.0);
  kernels::embedding_backward(dtable.data(), ids.data(), w.data(), n, dim, table_rows);
  EXPECT_TRUE(testing::gradients_match("dtable", dtable, testing::numeric_gradient(table, loss)));
}

TEST(EmbeddingConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kN = 32, kDim = 65, kRows = 20;
#else
  constexpr std::int64_t kN = 512, kDim = 385, kRows = 300;
#endif
  // Each thread looks up and scatters back on its own table; the results
  // must equal a lone call's bit for bit.
  expect_concurrent_matches_serial([](int t) {
    const auto key = static_cast<std::uint64_t>(100 + 10 * t);
    const std::vector<float> table = random_values<float>(kRows * kDim, key);
    const std::vector<std::int32_t> ids = random_indices(kN, kRows, key + 1);
    const std::vector<float> dout = random_values<float>(kN * kDim, key + 2);
    std::vector<float> out(static_cast<std::size_t>(kN * kDim)), dtable(table.size(), 0.0f);
    kernels::embedding_forward(out.data(), ids.data(), table.data(), kN, kDim, kRows);
    kernels::embedding_backward(dtable.data(), ids.data(), dout.data(), kN, kDim, kRows);
    return std::vector<std::vector<float>>{out, dtable};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
