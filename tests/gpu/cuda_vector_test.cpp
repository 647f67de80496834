// kernels::Vector on a device Place: what the model's caches rely on when
// they live on a GPU -- growth keeps the values and zeroes the new ones on
// the device, copies stay on the device, a Place change carries the values
// across, and the host never reads device memory by accident. The host half
// is tests/kernels/vector_test.cpp.
#include "dtw/kernels/vector.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "dtw/errors.h"
#include "gpu_test.h"

namespace dtw::kernels {
namespace {

using dtw::testing::Stream;

bool on_device(const void* p) {
  cudaPointerAttributes a{};
  DTW_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  return a.type == cudaMemoryTypeDevice;
}

TEST(CudaVectorTest, GrowthOnTheDeviceKeepsTheValuesAndZeroesTheNewOnes) {
  DTW_REQUIRE_GPUS(1);
  Stream stream;
  const Place at = Place::cuda(0, stream.s);
  Vector<double> b(at);
  const std::vector<double> first = {1, 2, 3};
  b.assign(first.begin(), first.end());
  ASSERT_TRUE(on_device(b.data()));
  b.resize(1000);
  std::vector<double> want(1000, 0.0);
  want[0] = 1;
  want[1] = 2;
  want[2] = 3;
  EXPECT_EQ(b.to_vector(), want);
  b.assign(10, 0.25);
  EXPECT_EQ(b.to_vector(), std::vector<double>(10, 0.25));
  const std::int32_t ids[] = {4, 5};
  Vector<std::int32_t> tokens(at);
  tokens.insert(tokens.end(), ids, ids + 2);
  tokens.insert(tokens.end(), ids, ids + 1);
  EXPECT_EQ(tokens.to_vector(), (std::vector<std::int32_t>{4, 5, 4}));
}

TEST(CudaVectorTest, CopiesStayOnTheDevicePlaceChangesCarryTheValues) {
  DTW_REQUIRE_GPUS(1);
  Stream stream;
  const Place at = Place::cuda(0, stream.s);
  Vector<float> b(at);
  b.assign(5, 1.5f);
  Vector<float> copy = b;
  EXPECT_EQ(copy.place(), at);
  EXPECT_TRUE(on_device(copy.data()));
  EXPECT_NE(copy.data(), b.data());
  EXPECT_EQ(copy.to_vector(), std::vector<float>(5, 1.5f));
  copy.set_place(Place::host());  // device -> host: the values come along
  EXPECT_EQ(copy[4], 1.5f);
  copy[4] = 7;
  copy.set_place(at);  // and back
  EXPECT_TRUE(on_device(copy.data()));
  EXPECT_EQ(copy.to_vector(), (std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, 7}));
  EXPECT_THROW((void)copy[0], InvalidArgument);
}

}  // namespace
}  // namespace dtw::kernels
