// reduce_into (the Kokkos kernel) against reduce_into_reference (a plain loop),
// for every op and type, and from many rank threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "dtw/kernels/reduce.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

// Values kept small so that products neither overflow integers nor lose every
// bit of a float; signs mixed so min and max differ from first/last.
template <class T>
std::vector<T> small_integers(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(static_cast<int>(rng() % 7) - 3);
  return v;
}

template <class T>
void check_all_ops(std::int64_t count, unsigned seed) {
  const auto n = static_cast<std::size_t>(count);
  const std::vector<T> src = small_integers<T>(n, seed);
  for (ReduceOp op : kOps) {
    std::vector<T> got = small_integers<T>(n, seed + 1), expected = got;
    kernels::reduce_into(got.data(), src.data(), count, op);
    kernels::reduce_into_reference(expected.data(), src.data(), count, op);
    // Bitwise: the kernel must compute exactly what the loop computes.
    ASSERT_TRUE(bitwise_equal(expected, got))
        << name_of(data_type_of<T>()) << " " << name_of(op) << " count " << count << ": "
        << testing::compare<T>(0, expected, got);
  }
}

template <class T>
class ReduceTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<std::int32_t, std::int64_t, float, double>;
TYPED_TEST_SUITE(ReduceTest, ElementTypes);

TYPED_TEST(ReduceTest, MatchesReferenceForEveryOp) {
  for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{17},
                             std::int64_t{1} << 20})
    check_all_ops<TypeParam>(count, 42u + static_cast<unsigned>(count % 1000));
}

TYPED_TEST(ReduceTest, ReferenceComputesTheOp) {
  using T = TypeParam;
  const std::vector<T> src{T(2), T(-1), T(3)};
  const struct { ReduceOp op; std::vector<T> want; } cases[] = {
      {ReduceOp::kSum, {T(3), T(1), T(3)}},  {ReduceOp::kAvg, {T(3), T(1), T(3)}},
      {ReduceOp::kProd, {T(2), T(-2), T(0)}}, {ReduceOp::kMin, {T(1), T(-1), T(0)}},
      {ReduceOp::kMax, {T(2), T(2), T(3)}}};
  for (const auto& c : cases) {
    std::vector<T> a{T(1), T(2), T(0)}, b = a;
    kernels::reduce_into_reference(a.data(), src.data(), 3, c.op);
    kernels::reduce_into(b.data(), src.data(), 3, c.op);
    EXPECT_EQ(a, c.want) << name_of(c.op);
    EXPECT_EQ(b, c.want) << name_of(c.op);
  }
}

TEST(ReduceBufferTest, UntypedViewDispatchesAndChecks) {
  std::vector<float> dst(5, 1.0f), src(5, 2.0f);
  kernels::reduce_into(as_buffer(std::span<float>(dst)), as_buffer(std::span<const float>(src)),
                       ReduceOp::kMax);
  EXPECT_EQ(dst, std::vector<float>(5, 2.0f));
  std::vector<double> wrong_type(5);
  EXPECT_THROW(kernels::reduce_into(as_buffer(std::span<double>(wrong_type)),
                                    as_buffer(std::span<const float>(src)), ReduceOp::kSum),
               InvalidArgument);
  EXPECT_THROW(kernels::reduce_into(as_buffer(std::span<float>(dst).first(4)),
                                    as_buffer(std::span<const float>(src)), ReduceOp::kSum),
               InvalidArgument);
  std::vector<std::byte> bytes(5);
  EXPECT_THROW(kernels::reduce_into(as_buffer(std::span<std::byte>(bytes)),
                                    as_buffer(std::span<const std::byte>(bytes)), ReduceOp::kSum),
               InvalidArgument);
  float x = 0;
  EXPECT_THROW(kernels::reduce_into(&x, &x, -1, ReduceOp::kSum), InvalidArgument);
}

TEST(ReduceBufferTest, ConcurrentCallsFromEightRanks) {
#ifdef DTW_TSAN
  constexpr std::int64_t kCount = 1 << 14;
#else
  constexpr std::int64_t kCount = 1 << 20;
#endif
  testing::launch_bounded(8, [](Comm& comm) {
    for (int rep = 0; rep < 4; ++rep) {
      const unsigned seed = static_cast<unsigned>(comm.rank() * 10 + rep);
      check_all_ops<float>(kCount, seed);
      check_all_ops<std::int64_t>(kCount / 3 + 1, seed);
    }
  }, std::chrono::seconds(60));
}

}  // namespace
}  // namespace dtw::kernel_test

// The comparison every kernel and collective test prints its first mismatch
// with: two values that differ never print alike (a learner once read
// "expected -1.479, got -1.479").
TEST(CompareTest, TwoValuesThatDifferNeverPrintAlike) {
  const float e = -1.479f, g = std::nextafter(e, 0.0f);
  const std::string message =
      dtw::testing::compare<float>(3, std::vector<float>{e}, std::vector<float>{g});
  EXPECT_EQ(message, "rank 3, index 0: expected -1.479, got -1.4789999");
  EXPECT_EQ(dtw::testing::exact_text(0.1), "0.1");
  EXPECT_EQ(dtw::testing::exact_text(std::int8_t{-3}), "-3");
  EXPECT_EQ(dtw::testing::compare<double>(0, std::vector<double>{1.0}, std::vector<double>{1.0}), "");
}
