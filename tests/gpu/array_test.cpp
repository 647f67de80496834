// dtw::Array on a CUDA device: allocation on the Exec's stream, copies both
// ways, fill (memset and kernel paths), copies between device Arrays, and the
// ledger. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dtw/array.h"
#include "gpu_test.h"

namespace dtw {
namespace {

TEST(GpuArrayTest, UploadDownloadFillCopyOnAStream) {
  DTW_REQUIRE_GPUS(1);
  cudaStream_t stream = nullptr;
  DTW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto ledger = std::make_shared<MemoryLedger>(0);
  {
    const Exec exec = Exec::cuda(0, stream).with_ledger(ledger);
    Array<double> a(exec, 1000, MemoryCategory::kParameters);
    EXPECT_EQ(ledger->current(MemoryCategory::kParameters), 8000);
    std::vector<double> values(1000);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5 * static_cast<double>(i);
    a.upload(values);
    EXPECT_EQ(a.to_vector(), values);
    a.fill(2.5);  // bytes differ: the fill kernel
    EXPECT_EQ(a.to_vector(), std::vector<double>(1000, 2.5));
    Array<std::int32_t> z(exec, 333);
    z.fill(0);  // uniform bytes: cudaMemsetAsync
    EXPECT_EQ(z.to_vector(), std::vector<std::int32_t>(333, 0));
    Array<double> b(exec, 1000);
    b.copy_from(a);
    EXPECT_EQ(b.to_vector(), std::vector<double>(1000, 2.5));
    cudaPointerAttributes attr{};
    DTW_CUDA_CHECK(cudaPointerGetAttributes(&attr, a.data()));
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
    EXPECT_THROW(b.copy_from(Array<double>(Exec::host(), 1000)), InvalidArgument);
  }
  EXPECT_EQ(ledger->current_total(), 0);
  DTW_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace dtw
