// What a GPU test says when the machine cannot run it. Runs everywhere, with
// or without a GPU: a skip must read as a skip, never as a pass, and with one
// GPU it must say that the multi-rank checks did not run.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test.h"

namespace dtw {
namespace {

using testing::gpu_shortfall;

TEST(GpuSkipTest, NoDeviceSaysWhatCudaReported) {
  EXPECT_EQ(gpu_shortfall(0, 1, "cudaGetDeviceCount: no CUDA-capable device is detected"),
            "no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected");
}

TEST(GpuSkipTest, OneGpuSaysTheMultiRankCheckDidNotRun) {
  const std::string why = gpu_shortfall(1, 2, "cudaGetDeviceCount found 1 device(s)");
  EXPECT_NE(why.find("needs 2 CUDA devices, this machine has 1"), std::string::npos) << why;
  EXPECT_NE(why.find("one rank per GPU"), std::string::npos) << why;
  EXPECT_NE(why.find("did not run"), std::string::npos) << why;
}

TEST(GpuSkipTest, EnoughGpusRun) {
  EXPECT_EQ(gpu_shortfall(1, 1, ""), "");
  EXPECT_EQ(gpu_shortfall(8, 3, ""), "");
}

}  // namespace
}  // namespace dtw
