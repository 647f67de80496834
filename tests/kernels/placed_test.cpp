// The training kernels on a Place (dtw/kernels/place.h). On the host a Place
// overload is the host kernel: the same bits, the same checks. A device Place
// the machine cannot serve is a clear error naming the kernel and the place --
// on every machine, so these run in CI; tests/gpu/cuda_placed_test.cpp runs the
// device branch where there is a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "dtw/config.h"
#include "dtw/exec.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/attention.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/embedding.h"
#include "dtw/kernels/layernorm.h"
#include "dtw/kernels/matmul.h"
#include "dtw/kernels/optim.h"
#include "kernel_test_util.h"

namespace dtw::kernels {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::random_indices;
using kernel_test::random_values;

template <class T>
class PlacedTest : public ::testing::Test {};
TYPED_TEST_SUITE(PlacedTest, kernel_test::RealTypes);

TYPED_TEST(PlacedTest, OnTheHostEveryOverloadGivesTheHostKernelsBits) {
  using T = TypeParam;
  const Place host = Place::host();
  const std::int64_t m = 7, n = 5, k = 3;
  const auto a = random_values<T>(m * k, 1), b = random_values<T>(k * n, 2);
  std::vector<T> c1(m * n, T(0.5)), c2 = c1;
  matmul(Trans::kNo, Trans::kNo, m, n, k, T(1), a.data(), b.data(), T(1), c1.data());
  matmul(host, Trans::kNo, Trans::kNo, m, n, k, T(1), a.data(), b.data(), T(1), c2.data());
  EXPECT_TRUE(bitwise_equal(c1, c2)) << "matmul";

  const auto x = random_values<T>(m * n, 3), gamma = random_values<T>(n, 4, 0.1, 1.0),
             beta = random_values<T>(n, 5);
  std::vector<T> y1(m * n), y2(m * n), mean1(m), mean2(m), rstd1(m), rstd2(m);
  layernorm_forward(y1.data(), mean1.data(), rstd1.data(), x.data(), gamma.data(), beta.data(), m,
                    n);
  layernorm_forward(host, y2.data(), mean2.data(), rstd2.data(), x.data(), gamma.data(),
                    beta.data(), m, n);
  EXPECT_TRUE(bitwise_equal(y1, y2) && bitwise_equal(rstd1, rstd2)) << "layernorm_forward";

  // A kernel that returns a value returns the host's.
  const auto targets = random_indices(m, n, 6);
  std::vector<T> p1(m * n), p2(m * n), l1(m), l2(m);
  const T loss1 = cross_entropy_forward(p1.data(), l1.data(), x.data(), targets.data(), m, n);
  const T loss2 =
      cross_entropy_forward(host, p2.data(), l2.data(), x.data(), targets.data(), m, n);
  EXPECT_EQ(loss1, loss2) << "cross_entropy_forward";
  EXPECT_TRUE(bitwise_equal(p1, p2)) << "cross_entropy_forward's probs";

  std::vector<T> g1 = random_values<T>(50, 7, 3.0), g2 = g1;
  EXPECT_EQ(clip_grad_norm(g1.data(), 50, 1.0), clip_grad_norm(host, g2.data(), 50, 1.0));
  EXPECT_TRUE(bitwise_equal(g1, g2)) << "clip_grad_norm";

  std::vector<T> p = random_values<T>(50, 8), q = p, mom(50, T(0)), mom2 = mom, v(50, T(0)),
                 v2 = v;
  const auto grads = random_values<T>(50, 9);
  adamw_step(p.data(), grads.data(), mom.data(), v.data(), 50, 1, AdamWConfig{});
  adamw_step(host, q.data(), grads.data(), mom2.data(), v2.data(), 50, 1, AdamWConfig{});
  EXPECT_TRUE(bitwise_equal(p, q) && bitwise_equal(v, v2)) << "adamw_step";

  const AttentionShape shape{1, 2, 4, 4, 3};
  const auto qkv = random_values<T>(3 * 2 * 4 * 3, 10);
  const T* qp = qkv.data();
  std::vector<T> o1(24), o2(24), pr1(32), pr2(32);
  attention_forward(o1.data(), pr1.data(), qp, qp + 24, qp + 48, shape);
  attention_forward(host, o2.data(), pr2.data(), qp, qp + 24, qp + 48, shape);
  EXPECT_TRUE(bitwise_equal(o1, o2) && bitwise_equal(pr1, pr2)) << "attention_forward";
}

TYPED_TEST(PlacedTest, OnTheHostTheHostKernelsChecksStillApply) {
  using T = TypeParam;
  const std::vector<std::int32_t> ids{0, 3, 9};  // 9 is outside a table of 4 rows
  const auto table = random_values<T>(4 * 2, 11);
  std::vector<T> out(3 * 2);
  kernel_test::expect_invalid(
      [&] { embedding_forward(Place::host(), out.data(), ids.data(), table.data(), 3, 2, 4); },
      {"9"});
  kernel_test::expect_invalid([&] { gelu_forward(Place::host(), out.data(), out.data(), -1); },
                              {"-1"});
}

// A device this machine does not have (99: no machine has that many) names
// the kernel, the place and how many devices there are; a build without CUDA
// says so instead. Either way nothing runs on the host pointers.
TYPED_TEST(PlacedTest, ADevicePlaceTheMachineCannotServeIsAClearError) {
  using T = TypeParam;
  std::vector<T> y(6, T(1)), x(6, T(2));
  const Place nowhere = Place::cuda(99);
  try {
    add_into(nowhere, y.data(), x.data(), 6);
    FAIL() << "add_into on cuda:99 returned";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, ::testing::HasSubstr("kernels::add_into on cuda:99"));
    if (DTW_HAVE_CUDA)
      EXPECT_THAT(what, ::testing::HasSubstr("CUDA device(s)"));
    else
      EXPECT_THAT(what, ::testing::HasSubstr("built without CUDA"));
  }
  EXPECT_EQ(y, std::vector<T>(6, T(1))) << "the host memory was touched";
  EXPECT_THROW(sum_of_squares(nowhere, x.data(), 6), Error);
}

TEST(PlaceTest, AnExecHandsOutItsPlace) {
  EXPECT_TRUE(Exec::host().place().is_host());
  EXPECT_EQ(Exec::host().place().describe(), "host");
  int stream_stand_in = 0;
  const Place p = Exec::cuda(2, &stream_stand_in).place();
  EXPECT_EQ(p.device, 2);
  EXPECT_EQ(p.stream, &stream_stand_in);
  EXPECT_EQ(p.describe(), "cuda:2");
}

}  // namespace
}  // namespace dtw::kernels
