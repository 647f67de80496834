// What launch refuses about LaunchOptions::device, with the real CUDA
// runtime, on any machine: values it does not know, "cuda" with fibers,
// "cuda" where the machine has no CUDA device (the check a GPU-less CI
// machine runs; on a GPU machine that test skips and the device launch runs
// instead), and that leaving the option alone changes nothing: host ranks,
// reported as such. Runs with the core tests (labels core and gpu).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "gpu_test.h"

namespace dtw {
namespace {

LaunchOptions with_device(const std::string& device) {
  LaunchOptions options;
  options.device = device;
  options.timeout = std::chrono::seconds(20);
  return options;
}

// Runs `fn`, expecting an Error of type E whose message holds `part`; returns the message.
template <class E, class F>
std::string expect_refusal(F&& fn, const std::string& part) {
  try {
    fn();
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused (expected: " << part << ")";
  return {};
}

TEST(ThreadsDeviceRefusalTest, AnUnknownDeviceIsRefusedByName) {
  bool ran = false;
  expect_refusal<InvalidArgument>(
      [&] { launch(2, with_device("gpu"), [&](Comm&) { ran = true; }); },
      "launch: device 'gpu' is not a place launch knows");
  expect_refusal<InvalidArgument>([] { check_launch_options(2, with_device("CUDA")); },
                                  "device 'CUDA'");
  EXPECT_FALSE(ran);
}

TEST(ThreadsDeviceRefusalTest, CudaWithFibersIsRefusedSayingWhy) {
  LaunchOptions options = with_device("cuda");
  options.rank_mode = RankMode::kFibers;
  expect_refusal<InvalidArgument>(
      [&] { check_launch_options(4, options); },
      "device 'cuda' with rank mode fibers (RankMode::kFibers): ranks on "
      "GPUs need an OS thread each");
  options.rank_mode = RankMode::kAuto;
  ::setenv("DTW_RANK_MODE", "fibers", 1);
  expect_refusal<InvalidArgument>([&] { check_launch_options(4, options); },
                                  "(DTW_RANK_MODE=fibers)");
  ::unsetenv("DTW_RANK_MODE");
}

TEST(ThreadsDeviceRefusalTest, CudaWithoutADeviceIsRefusedBeforeAnyRankRuns) {
  std::string why;
  const int devices = testing::cuda_devices(&why);
  if (devices > 0)
    GTEST_SKIP() << "this machine has " << devices
                 << " CUDA device(s): the refusal without one cannot be seen here";
  bool ran = false;
  const std::string what = expect_refusal<CudaError>(
      [&] { launch(2, with_device("cuda"), [&](Comm&) { ran = true; }); },
      "launch: device 'cuda' (threads backend, world of 2): no CUDA device (");
  EXPECT_NE(what.find("leave LaunchOptions::device empty for host ranks"), std::string::npos)
      << what;
  EXPECT_FALSE(ran);
  // launch_collecting refuses the same way: nothing ran, so there is no report.
  expect_refusal<CudaError>(
      [&] { launch_collecting(3, with_device("cuda"), [&](Comm&) { ran = true; }); },
      "world of 3): no CUDA device");
  EXPECT_FALSE(ran);
}

TEST(ThreadsDeviceRefusalTest, WithADeviceTheRanksRunThere) {
  DTW_REQUIRE_GPUS(1);
  const Report report =
      launch(2, with_device("cuda"), [](Comm& comm) { EXPECT_FALSE(comm.exec().is_host()); });
  EXPECT_EQ(report.places.size(), 2u);
  EXPECT_EQ(report.places[0], "cuda:0");
}

TEST(ThreadsDeviceRefusalTest, HostRanksAreUnchangedAndReportedAsHost) {
  for (const std::string device : {"", "host"}) {
    const Report report = launch(3, with_device(device), [](Comm& comm) {
      EXPECT_TRUE(comm.exec().is_host());
      EXPECT_EQ(comm.exec().stream(), nullptr);
      std::vector<int> v{comm.rank()};
      comm.reference_allreduce(Buffer{v.data(), 1, DataType::kInt32}, ReduceOp::kSum);
      EXPECT_EQ(v[0], 3);
    });
    EXPECT_EQ(report.places, (std::vector<std::string>{"host", "host", "host"}))
        << "'" << device << "'";
  }
}

}  // namespace
}  // namespace dtw
