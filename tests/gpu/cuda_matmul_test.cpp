// device_matmul (cuBLAS) against matmul_reference (three loops in double): the
// four transpose forms on odd shapes and one large one, NaN in C under beta 0,
// alpha and beta, K = 0, M or N = 0, a stream, rank threads, run-to-run
// bitwise equality, and the argument checks (which need no GPU).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

#include "dtw/kernels/cuda_matmul.h"
#include "dtw/kernels/matmul.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

using kernels::Trans;
using testing::DeviceArray;

struct Case {
  std::int64_t m, n, k;
};
// 1 in every position, odd shapes that are multiples of no tile size, a long
// inner dimension (cuBLAS may split K), and one large product.
constexpr Case kCases[] = {{1, 1, 1},  {1, 7, 1},    {7, 1, 5},     {1, 1, 300},  {7, 13, 5},
                           {13, 7, 1}, {31, 17, 29}, {64, 33, 257}, {3, 5, 4099}, {300, 257, 1025}};
constexpr Trans kTrans[] = {Trans::kNo, Trans::kYes};

template <class T>
std::vector<T> nan_vector(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

// C on the device after device_matmul with C = c0 beforehand (default stream).
template <class T>
std::vector<T> run_device(Trans ta, Trans tb, const Case& s, T alpha, const std::vector<T>& a,
                          const std::vector<T>& b, T beta, const std::vector<T>& c0,
                          cudaStream_t stream = nullptr) {
  DeviceArray<T> da(a.size()), db(b.size()), dc(c0.size());
  da.upload(a);
  db.upload(b);
  dc.upload(c0);
  kernels::device_matmul(ta, tb, s.m, s.n, s.k, alpha, da.data(), db.data(), beta, dc.data(),
                         stream);
  return dc.download();
}

// C = alpha·op(A)·op(B) + beta·C0 on the device, twice (bitwise equal), against
// the reference element by element within the dot-product bound of
// tests/kernels/matmul_test.cpp: a sum of k products in T errs by at most
// k·u·Σ|a·b| (u = eps/2) whatever the summation order (cuBLAS may tile and
// split K, and fuses multiply-adds, which only removes roundings); alpha, beta
// and the reference's own rounding to T add a few more, so
// (k + 2)·eps·(|alpha|·Σ|a·b| + |beta·c0|) holds. The bound matrix is the
// reference product of |A| and |B|. A NaN anywhere fails the comparison.
template <class T>
void check_product(Trans ta, Trans tb, const Case& s, T alpha, T beta, const std::vector<T>& c0) {
  SCOPED_TRACE(::testing::Message()
               << "m " << s.m << " n " << s.n << " k " << s.k << " ta " << (ta == Trans::kYes)
               << " tb " << (tb == Trans::kYes) << " alpha " << alpha << " beta " << beta);
  const std::vector<T> a = random_values<T>(s.m * s.k, 1), b = random_values<T>(s.k * s.n, 2);
  const std::vector<T> got = run_device(ta, tb, s, alpha, a, b, beta, c0);
  const std::vector<T> again = run_device(ta, tb, s, alpha, a, b, beta, c0);
  ASSERT_TRUE(bitwise_equal(got, again)) << "two runs differ";
  std::vector<T> want = c0;
  kernels::matmul_reference(ta, tb, s.m, s.n, s.k, alpha, a.data(), b.data(), beta, want.data());
  std::vector<T> abs_a(a.size()), abs_b(b.size()), bound(c0.size());
  for (std::size_t i = 0; i < a.size(); ++i) abs_a[i] = std::abs(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) abs_b[i] = std::abs(b[i]);
  for (std::size_t i = 0; i < c0.size(); ++i) bound[i] = beta == T(0) ? T(0) : std::abs(c0[i]);
  kernels::matmul_reference(ta, tb, s.m, s.n, s.k, std::abs(alpha), abs_a.data(), abs_b.data(),
                            std::abs(beta), bound.data());
  const double eps = std::numeric_limits<T>::epsilon();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = static_cast<double>(s.k + 2) * eps * static_cast<double>(bound[i]);
    ASSERT_LE(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])), tol)
        << "index " << i << ": reference " << want[i] << ", device " << got[i];
  }
}

template <class T>
class CudaMatmulTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaMatmulTest, RealTypes);

// beta 0 over a C full of NaN: every element must be written (and NaN-free).
TYPED_TEST(CudaMatmulTest, MatchesReferenceForEveryTransposeOverNaN) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const Case& s : kCases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) check_product<T>(ta, tb, s, T(0.75), T(0), nan_vector<T>(s.m * s.n));
}

TYPED_TEST(CudaMatmulTest, ScalesByAlphaAndBeta) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const Case& s : kCases) {
    if (s.m * s.n * s.k > 1000000) continue;  // the large shape is covered above
    for (Trans ta : kTrans) {
      for (Trans tb : kTrans) {
        check_product<T>(ta, tb, s, T(1), T(1), random_values<T>(s.m * s.n, 3));
        check_product<T>(ta, tb, s, T(-1.5), T(0.5), random_values<T>(s.m * s.n, 4));
      }
    }
  }
}

// K = 0: C = beta·C exactly (the host rule), beta 0 writing zeros over NaN, A
// and B never read (null). 601×1031 elements are more than one pass of the grid.
TYPED_TEST(CudaMatmulTest, ZeroInnerSizeScalesCByBeta) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const Case s : {Case{2, 3, 0}, Case{1, 1, 0}, Case{601, 1031, 0}}) {
    SCOPED_TRACE(::testing::Message() << "m " << s.m << " n " << s.n);
    const std::vector<T> c0 = random_values<T>(s.m * s.n, 5);
    DeviceArray<T> dc(c0.size());
    dc.upload(c0);
    kernels::device_matmul(Trans::kNo, Trans::kYes, s.m, s.n, 0, T(1),
                           static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), T(2),
                           dc.data());
    std::vector<T> want = c0;
    kernels::matmul(Trans::kNo, Trans::kYes, s.m, s.n, 0, T(1), static_cast<const T*>(nullptr),
                    static_cast<const T*>(nullptr), T(2), want.data());
    EXPECT_TRUE(bitwise_equal(want, dc.download())) << "beta 2";  // one exact doubling each
    dc.upload(nan_vector<T>(s.m * s.n));
    kernels::device_matmul(Trans::kYes, Trans::kNo, s.m, s.n, 0, T(1),
                           static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), T(0),
                           dc.data());
    EXPECT_TRUE(bitwise_equal(std::vector<T>(c0.size(), T(0)), dc.download())) << "beta 0 over NaN";
  }
}

// M or N of 0 launches nothing: a NaN-filled buffer passed as C stays as it was.
TYPED_TEST(CudaMatmulTest, EmptyOutputTouchesNothing) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const std::vector<T> poison = nan_vector<T>(8);
  DeviceArray<T> da(8), db(8), dc(8);
  da.upload(random_values<T>(8, 6));
  db.upload(random_values<T>(8, 7));
  dc.upload(poison);
  kernels::device_matmul(Trans::kNo, Trans::kNo, 0, 3, 2, T(1), da.data(), db.data(), T(0),
                         dc.data());
  kernels::device_matmul(Trans::kYes, Trans::kNo, 3, 0, 2, T(1), da.data(), db.data(), T(0),
                         dc.data());
  kernels::device_matmul(Trans::kNo, Trans::kYes, 0, 0, 0, T(1), da.data(), db.data(), T(0),
                         dc.data());
  EXPECT_TRUE(bitwise_equal(poison, dc.download()));
}

// A caller's stream, and rank threads each with their own stream (so each its
// own handle on its own stream: the case cuBLAS documents as deterministic),
// give bitwise what a lone call on the default stream gives.
TYPED_TEST(CudaMatmulTest, StreamsAndThreadsMatchALoneCall) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const Case s{97, 131, 515};
  const std::vector<T> a = random_values<T>(s.m * s.k, 8), b = random_values<T>(s.k * s.n, 9);
  const std::vector<T> c0 = random_values<T>(s.m * s.n, 10);
  const std::vector<T> lone = run_device(Trans::kYes, Trans::kNo, s, T(1), a, b, T(0.5), c0);
  constexpr int kRanks = 4;
  std::vector<std::vector<T>> got(kRanks);
  std::latch start(kRanks);
  std::vector<std::thread> threads;
  for (int t = 0; t < kRanks; ++t) {
    threads.emplace_back([&, t] {
      // Every thread reaches the latch whatever fails, and nothing escapes a
      // thread (std::terminate); a failure leaves got[t] empty, which fails below.
      cudaStream_t stream = nullptr;
      const bool created = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
      start.arrive_and_wait();
      if (!created) return;
      try {
        got[static_cast<std::size_t>(t)] =
            run_device(Trans::kYes, Trans::kNo, s, T(1), a, b, T(0.5), c0, stream);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "thread %d: %s\n", t, e.what());
      }
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kRanks; ++t)
    EXPECT_TRUE(bitwise_equal(lone, got[static_cast<std::size_t>(t)])) << "thread " << t;
}

// Checked before any CUDA call, so these pass without a GPU too.
TYPED_TEST(CudaMatmulTest, BadArgumentsAreInvalidArgument) {
  using T = TypeParam;
  T x = 0;
  expect_invalid(
      [&] { kernels::device_matmul(Trans::kNo, Trans::kNo, -2, 1, 1, T(1), &x, &x, T(0), &x); },
      "m -2");
  expect_invalid(
      [&] { kernels::device_matmul(Trans::kNo, Trans::kNo, 1, -3, 1, T(1), &x, &x, T(0), &x); },
      "n -3");
  expect_invalid(
      [&] { kernels::device_matmul(Trans::kYes, Trans::kNo, 1, 1, -4, T(1), &x, &x, T(0), &x); },
      "k -4");
  const std::int64_t big = std::int64_t{1} << 31;
  expect_invalid(
      [&] { kernels::device_matmul(Trans::kNo, Trans::kNo, big, 1, 1, T(1), &x, &x, T(0), &x); },
      {"32-bit", "m 2147483648"});
  expect_invalid(
      [&] { kernels::device_matmul(Trans::kNo, Trans::kYes, 1, 1, big, T(1), &x, &x, T(0), &x); },
      {"32-bit", "k 2147483648"});
  expect_invalid(
      [&] {
        kernels::device_matmul(Trans::kNo, Trans::kNo, 2, 3, 4, T(1), &x, &x, T(0),
                               static_cast<T*>(nullptr));
      },
      {"C is null", "m 2, n 3"});
  expect_invalid(
      [&] {
        kernels::device_matmul(Trans::kNo, Trans::kNo, 2, 3, 4, T(1),
                               static_cast<const T*>(nullptr), &x, T(0), &x);
      },
      {"A or B is null", "m 2, n 3, k 4"});
}

}  // namespace
}  // namespace dtw::kernel_test
