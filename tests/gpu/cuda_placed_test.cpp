// The training kernels on a device Place (dtw/kernels/place.h): the overload
// is its CUDA twin on the Place's stream -- the same bits as calling the twin
// directly -- made current on the Place's device, and safe from many rank
// threads at once, each on a stream of its own, as the ranks of the threads
// backend on one GPU call it. The twins themselves are checked against the CPU
// references in cuda_FAMILY_test.cpp; here only the dispatch is.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/cuda_cross_entropy.h"
#include "dtw/kernels/cuda_matmul.h"
#include "dtw/kernels/cuda_optim.h"
#include "dtw/kernels/matmul.h"
#include "dtw/kernels/optim.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw::kernels {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::random_indices;
using kernel_test::random_values;
using testing::DeviceArray;
using testing::to_device;

using dtw::testing::Stream;

template <class T>
class CudaPlacedTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaPlacedTest, kernel_test::RealTypes);

TYPED_TEST(CudaPlacedTest, ADevicePlaceRunsTheTwinOnItsStream) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  Stream stream;
  const Place at = Place::cuda(0, stream.s);
  const std::int64_t m = 33, n = 17, k = 65;
  auto a = to_device(random_values<T>(m * k, 1)), b = to_device(random_values<T>(k * n, 2));
  DeviceArray<T> c1(m * n), c2(m * n);
  device_matmul(Trans::kNo, Trans::kYes, m, n, k, T(1), a.data(), b.data(), T(0), c1.data(),
                stream.s);
  matmul(at, Trans::kNo, Trans::kYes, m, n, k, T(1), a.data(), b.data(), T(0), c2.data());
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  EXPECT_TRUE(bitwise_equal(c1.download(), c2.download())) << "matmul";

  // A value-returning kernel returns the twin's value (it waits on the stream).
  auto logits = to_device(random_values<T>(m * n, 3));
  auto targets = to_device(random_indices(m, n, 4));
  DeviceArray<T> p1(m * n), p2(m * n), l1(m), l2(m);
  const T direct = device_cross_entropy_forward(p1.data(), l1.data(), logits.data(),
                                                targets.data(), m, n, stream.s);
  const T placed =
      cross_entropy_forward(at, p2.data(), l2.data(), logits.data(), targets.data(), m, n);
  EXPECT_EQ(direct, placed);
  EXPECT_TRUE(bitwise_equal(p1.download(), p2.download())) << "cross_entropy_forward";
}

// Ranks of the threads backend on one GPU: each a host thread with a stream of
// its own, all calling at once; every rank's result is the one a lone call gives.
TYPED_TEST(CudaPlacedTest, RankThreadsOnStreamsOfTheirOwnGetALoneCallsBits) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  constexpr int kRanks = 4;
  const std::int64_t n = 100003;
  std::vector<std::vector<T>> lone(kRanks), shared(kRanks);
  auto step = [&](int r, std::vector<T>& out) {
    Stream stream;
    const Place at = Place::cuda(0, stream.s);
    auto p = to_device(random_values<T>(n, 10 + r)), g = to_device(random_values<T>(n, 20 + r));
    auto mom = to_device(std::vector<T>(n, T(0))), v = to_device(std::vector<T>(n, T(0)));
    for (std::int64_t s = 1; s <= 3; ++s)
      adamw_step(at, p.data(), g.data(), mom.data(), v.data(), n, s, AdamWConfig{});
    clip_grad_norm(at, p.data(), n, 1.0);
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    out = p.download();
  };
  for (int r = 0; r < kRanks; ++r) step(r, lone[r]);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { step(r, shared[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(bitwise_equal(lone[r], shared[r])) << "rank " << r;
}

// With two or more GPUs, a Place on device 1 runs there whatever device the
// calling thread had current.
TEST(CudaPlaceDeviceTest, APlaceMakesItsDeviceCurrent) {
  DTW_REQUIRE_GPUS(2);
  DTW_CUDA_CHECK(cudaSetDevice(1));
  auto x = to_device(std::vector<float>(1000, 2.0f));  // memory on device 1
  DTW_CUDA_CHECK(cudaSetDevice(0));
  scale(Place::cuda(1), x.data(), 1000, 0.5f);
  int current = -1;
  DTW_CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(current, 1);
  EXPECT_EQ(x.download(), std::vector<float>(1000, 1.0f));
}

}  // namespace
}  // namespace dtw::kernels
