// The head permutes, copy_values and fill_values (Kokkos kernels) against
// their plain-loop references, bit for bit; split and join (merge) as inverses;
// a hand-checked layout; the checks; the Place overloads; many threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dtw/kernels/permute.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

struct Shape {
  std::int64_t batch, seq, heads, head_dim;
  std::int64_t elements() const { return batch * seq * heads * head_dim; }
};
// Empty in each size; one of everything; odd sizes; a GPT-like block.
constexpr Shape kShapes[] = {{0, 3, 2, 4}, {2, 0, 2, 4}, {2, 3, 0, 4}, {2, 3, 2, 0},
                             {1, 1, 1, 1}, {3, 5, 7, 2}, {2, 16, 4, 8}};

template <class T>
class PermuteTest : public ::testing::Test {};
TYPED_TEST_SUITE(PermuteTest, RealTypes);

TYPED_TEST(PermuteTest, MatchesReferenceBitwise) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();  // poison: an element left out shows
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "batch " << s.batch << " seq " << s.seq << " heads "
                                      << s.heads << " head_dim " << s.head_dim);
    const std::int64_t n = s.elements();
    const auto qkv = random_values<T>(3 * n, 1);
    std::vector<T> q(n, nan), k(n, nan), v(n, nan), qr(n, nan), kr(n, nan), vr(n, nan);
    kernels::split_qkv(q.data(), k.data(), v.data(), qkv.data(), s.batch, s.seq, s.heads,
                       s.head_dim);
    kernels::split_qkv_reference(qr.data(), kr.data(), vr.data(), qkv.data(), s.batch, s.seq,
                                 s.heads, s.head_dim);
    EXPECT_TRUE(bitwise_equal(q, qr) && bitwise_equal(k, kr) && bitwise_equal(v, vr))
        << "split_qkv";
    std::vector<T> joined(3 * n, nan), joined_ref(3 * n, nan);
    kernels::join_qkv(joined.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.heads,
                      s.head_dim);
    kernels::join_qkv_reference(joined_ref.data(), q.data(), k.data(), v.data(), s.batch, s.seq,
                                s.heads, s.head_dim);
    EXPECT_TRUE(bitwise_equal(joined, joined_ref)) << "join_qkv";
    EXPECT_TRUE(bitwise_equal(joined, qkv)) << "join_qkv is not split_qkv's inverse";

    const auto x = random_values<T>(n, 2);
    std::vector<T> ph(n, nan), ph_ref(n, nan), back(n, nan), back_ref(n, nan);
    kernels::split_heads(ph.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim);
    kernels::split_heads_reference(ph_ref.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim);
    EXPECT_TRUE(bitwise_equal(ph, ph_ref)) << "split_heads";
    kernels::merge_heads(back.data(), ph.data(), s.batch, s.seq, s.heads, s.head_dim);
    kernels::merge_heads_reference(back_ref.data(), ph.data(), s.batch, s.seq, s.heads, s.head_dim);
    EXPECT_TRUE(bitwise_equal(back, back_ref)) << "merge_heads";
    EXPECT_TRUE(bitwise_equal(back, x)) << "merge_heads is not split_heads' inverse";
  }
}

TYPED_TEST(PermuteTest, SplitQkvPutsEachHeadsRunInItsPlace) {
  // batch 1, seq 2, heads 2, head_dim 1: row t is [q_h0 q_h1 k_h0 k_h1 v_h0 v_h1].
  using T = TypeParam;
  const std::vector<T> qkv{1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16};
  std::vector<T> q(4), k(4), v(4);
  kernels::split_qkv(q.data(), k.data(), v.data(), qkv.data(), 1, 2, 2, 1);
  // [b, h, t]: head 0 at t = 0, 1, then head 1.
  EXPECT_EQ(q, (std::vector<T>{1, 11, 2, 12}));
  EXPECT_EQ(k, (std::vector<T>{3, 13, 4, 14}));
  EXPECT_EQ(v, (std::vector<T>{5, 15, 6, 16}));
}

TYPED_TEST(PermuteTest, CopyAndFillMatchReference) {
  using T = TypeParam;
  for (std::int64_t n : {0, 1, 7, 1000}) {
    const auto src = random_values<T>(n, 3);
    std::vector<T> a(n, T(-1)), b(n, T(-1));
    kernels::copy_values(a.data(), src.data(), n);
    kernels::copy_values_reference(b.data(), src.data(), n);
    EXPECT_TRUE(bitwise_equal(a, src) && bitwise_equal(b, src)) << "copy of " << n;
    kernels::copy_values(a.data(), a.data(), n);  // onto itself: nothing to do
    EXPECT_TRUE(bitwise_equal(a, src));
    kernels::fill_values(a.data(), n, T(-2.5));
    kernels::fill_values_reference(b.data(), n, T(-2.5));
    EXPECT_TRUE(bitwise_equal(a, b) && (n == 0 || a.back() == T(-2.5))) << "fill of " << n;
  }
}

TYPED_TEST(PermuteTest, NegativeSizesAreInvalidArguments) {
  using T = TypeParam;
  std::vector<T> a(4), b(4), c(4), d(12);
  expect_invalid([&] { kernels::split_qkv(a.data(), b.data(), c.data(), d.data(), 1, -2, 1, 1); },
                 {"split_qkv", "seq -2"});
  expect_invalid([&] { kernels::join_qkv(d.data(), a.data(), b.data(), c.data(), 1, 1, -3, 1); },
                 {"join_qkv", "heads -3"});
  expect_invalid([&] { kernels::merge_heads(a.data(), b.data(), -1, 1, 1, 1); },
                 {"merge_heads", "batch -1"});
  expect_invalid([&] { kernels::split_heads(a.data(), b.data(), 1, 1, 1, -4); },
                 {"split_heads", "head_dim -4"});
  expect_invalid([&] { kernels::copy_values(a.data(), b.data(), -5); }, {"copy_values", "-5"});
  expect_invalid([&] { kernels::fill_values(a.data(), -6, T(0)); }, {"fill_values", "-6"});
  // The Place overloads check the same on the host.
  expect_invalid([&] { kernels::fill_values(kernels::Place::host(), a.data(), -7, T(0)); },
                 {"fill_values", "-7"});
}

TYPED_TEST(PermuteTest, OnTheHostPlaceTheOverloadsGiveTheHostKernelsBits) {
  using T = TypeParam;
  const kernels::Place host = kernels::Place::host();
  const Shape s{2, 5, 3, 4};
  const std::int64_t n = s.elements();
  const auto qkv = random_values<T>(3 * n, 4);
  std::vector<T> q(n), k(n), v(n), q2(n), k2(n), v2(n), joined(3 * n), merged(n), ph(n);
  kernels::split_qkv(q.data(), k.data(), v.data(), qkv.data(), s.batch, s.seq, s.heads, s.head_dim);
  kernels::split_qkv(host, q2.data(), k2.data(), v2.data(), qkv.data(), s.batch, s.seq, s.heads,
                     s.head_dim);
  EXPECT_TRUE(bitwise_equal(q, q2) && bitwise_equal(k, k2) && bitwise_equal(v, v2));
  kernels::join_qkv(host, joined.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.heads,
                    s.head_dim);
  EXPECT_TRUE(bitwise_equal(joined, qkv));
  kernels::merge_heads(host, merged.data(), q.data(), s.batch, s.seq, s.heads, s.head_dim);
  kernels::split_heads(host, ph.data(), merged.data(), s.batch, s.seq, s.heads, s.head_dim);
  EXPECT_TRUE(bitwise_equal(ph, q));
  kernels::copy_values(host, merged.data(), k.data(), n);
  EXPECT_TRUE(bitwise_equal(merged, k));
  kernels::fill_values(host, merged.data(), n, T(3));
  EXPECT_EQ(merged, std::vector<T>(n, T(3)));
}

TYPED_TEST(PermuteTest, ADevicePlaceTheMachineCannotServeIsAClearError) {
  using T = TypeParam;
  std::vector<T> a(8, T(1)), b(8, T(2));
  try {
    kernels::merge_heads(kernels::Place::cuda(99), a.data(), b.data(), 1, 2, 2, 2);
    FAIL() << "merge_heads on cuda:99 returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("kernels::merge_heads on cuda:99"));
  }
  EXPECT_EQ(a, std::vector<T>(8, T(1))) << "the host memory was touched";
}

TYPED_TEST(PermuteTest, ManyThreadsGiveTheLoneCallsBits) {
  using T = TypeParam;
  const Shape s{2, 33, 4, 8};
  const std::int64_t n = s.elements();
  expect_concurrent_matches_serial([&](int t) {
    const auto qkv = random_values<T>(3 * n, 10 + t);
    std::vector<T> q(n), k(n), v(n), merged(n);
    kernels::split_qkv(q.data(), k.data(), v.data(), qkv.data(), s.batch, s.seq, s.heads,
                       s.head_dim);
    kernels::merge_heads(merged.data(), v.data(), s.batch, s.seq, s.heads, s.head_dim);
    return std::vector<std::vector<T>>{q, k, v, merged};
  });
}

}  // namespace
}  // namespace dtw::kernel_test
