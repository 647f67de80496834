// The host kernels' policy (kernels/src/host_policy.h, an internal header,
// hence the relative include): it names a host space, whatever Kokkos' default
// execution space is, and on Kokkos 4 each thread launches on its own Serial
// instance, so rank threads do not queue on one instance's launch lock.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "dtw/kernels/reduce.h"
#include "host_policy.h"  // kernels/src: the test target adds that folder

namespace dtw::kernel_test {
namespace {

using kernels::detail::host_instance;
using kernels::detail::host_range;
using kernels::detail::HostSpace;
using kernels::detail::kInstancePerThread;

static_assert(std::is_same_v<decltype(host_range(0, 1))::execution_space, HostSpace>);
static_assert(Kokkos::SpaceAccessibility<HostSpace, Kokkos::HostSpace>::accessible);

#if KOKKOS_VERSION >= 40000
// Kokkos 4 compares instances (the same internal instance or not).
bool same_instance(const HostSpace& a, const HostSpace& b) {
  return a == b;
}
#endif

TEST(HostPolicyTest, RangeCoversBeginToEnd) {
  kernels::ensure_kokkos_initialized();
  const auto policy = host_range(3, 11);
  EXPECT_EQ(policy.begin(), 3);
  EXPECT_EQ(policy.end(), 11);
}

TEST(HostPolicyTest, OneThreadKeepsItsInstance) {
  kernels::ensure_kokkos_initialized();
#if KOKKOS_VERSION >= 40000
  EXPECT_TRUE(same_instance(host_instance(), host_instance()));
  EXPECT_TRUE(same_instance(host_range(0, 4).space(), host_instance()));
#else
  GTEST_SKIP() << "Kokkos " << KOKKOS_VERSION << " cannot compare instances";
#endif
}

TEST(HostPolicyTest, EachThreadGetsItsOwnInstanceOnKokkos4) {
  kernels::ensure_kokkos_initialized();
  if (!kInstancePerThread) {
    GTEST_SKIP() << "one shared instance here (Kokkos " << KOKKOS_VERSION
                 << ", or DTW_HOST_KERNELS=parallel, or no Serial backend)";
  }
#if KOKKOS_VERSION >= 40000
  const HostSpace mine = host_instance();
  HostSpace theirs = mine;
  std::thread([&] { theirs = host_instance(); }).join();
  EXPECT_FALSE(same_instance(mine, theirs));
  EXPECT_FALSE(same_instance(mine, HostSpace{}));  // not the default instance either
#endif
}

// Kernels launched on host_range from several threads at once each fill their
// own array completely and correctly.
TEST(HostPolicyTest, ConcurrentLaunchesFromThreads) {
  kernels::ensure_kokkos_initialized();
  constexpr int kThreads = 4;
  constexpr std::int64_t kN = 1 << 16;
  constexpr int kRounds = 50;
  std::vector<std::vector<std::int64_t>> out(kThreads, std::vector<std::int64_t>(kN, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::int64_t* data = out[t].data();
      for (int round = 0; round < kRounds; ++round) {
        Kokkos::parallel_for("dtw::host_policy_test", host_range(0, kN),
                             [=](std::int64_t i) { data[i] += i * (t + 1); });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    for (std::int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(out[t][i], kRounds * i * (t + 1)) << "thread " << t << ", index " << i;
    }
  }
}

}  // namespace
}  // namespace dtw::kernel_test
