// The CUDA head permutes, copy and fill against the host references, float
// and double, bit for bit (they only move numbers): empty, one element, odd
// sizes and GPT-2's block shape (8 x 1024 tokens, 12 heads of 64). Each
// device call is made twice and must give the same bits, and once through a
// device Place (permute.h) on a stream of its own. The argument checks run
// without a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "dtw/kernels/cuda_permute.h"
#include "dtw/kernels/permute.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_invalid;
using kernel_test::random_values;
using testing::DeviceArray;
using testing::to_device;

struct Shape {
  std::int64_t batch, seq, heads, head_dim;
  std::int64_t n() const { return batch * seq * heads * head_dim; }
};
const std::vector<Shape> kShapes = {
    {0, 4, 2, 3}, {1, 1, 1, 1}, {3, 5, 7, 2}, {2, 33, 4, 13}, {8, 1024, 12, 64}};

template <class T>
class CudaPermuteTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaPermuteTest, kernel_test::RealTypes);

TYPED_TEST(CudaPermuteTest, PermutesMatchReferenceBitwise) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  std::uint64_t key = 10;
  for (const Shape& s : kShapes) {
    DTW_TRACE("batch " << s.batch << " seq " << s.seq << " heads " << s.heads << " head_dim "
                       << s.head_dim);
    const std::int64_t n = s.n();
    const auto qkv = random_values<T>(3 * n, ++key), x = random_values<T>(n, ++key);
    std::vector<T> q(n), k(n), v(n), ph(n), joined(3 * n), merged(n);
    kernels::split_qkv_reference(q.data(), k.data(), v.data(), qkv.data(), s.batch, s.seq, s.heads,
                                 s.head_dim);
    kernels::split_heads_reference(ph.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim);
    kernels::join_qkv_reference(joined.data(), q.data(), k.data(), v.data(), s.batch, s.seq,
                                s.heads, s.head_dim);
    kernels::merge_heads_reference(merged.data(), ph.data(), s.batch, s.seq, s.heads, s.head_dim);
    const DeviceArray<T> d_qkv = to_device(qkv), d_x = to_device(x);
    for (int run = 0; run < 2; ++run) {
      // Poisoned outputs: an element the kernel skips shows as NaN.
      const std::vector<T> nan(n, std::nan(""));
      DeviceArray<T> dq = to_device(nan), dk = to_device(nan), dv = to_device(nan),
                     dph = to_device(nan), dmerged = to_device(nan);
      DeviceArray<T> djoined = to_device(std::vector<T>(3 * n, std::nan("")));
      kernels::device_split_qkv(dq.data(), dk.data(), dv.data(), d_qkv.data(), s.batch, s.seq,
                                s.heads, s.head_dim);
      kernels::device_split_heads(dph.data(), d_x.data(), s.batch, s.seq, s.heads, s.head_dim);
      kernels::device_join_qkv(djoined.data(), dq.data(), dk.data(), dv.data(), s.batch, s.seq,
                               s.heads, s.head_dim);
      kernels::device_merge_heads(dmerged.data(), dph.data(), s.batch, s.seq, s.heads, s.head_dim);
      EXPECT_TRUE(bitwise_equal(q, dq.download()) && bitwise_equal(k, dk.download()) &&
                  bitwise_equal(v, dv.download()))
          << "split_qkv, run " << run;
      EXPECT_TRUE(bitwise_equal(ph, dph.download())) << "split_heads, run " << run;
      EXPECT_TRUE(bitwise_equal(joined, djoined.download())) << "join_qkv, run " << run;
      EXPECT_TRUE(bitwise_equal(merged, dmerged.download())) << "merge_heads, run " << run;
    }
  }
}

TYPED_TEST(CudaPermuteTest, CopyFillAndADevicePlaceGiveTheHostsBits) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  cudaStream_t stream = nullptr;
  DTW_CUDA_CHECK(cudaStreamCreate(&stream));
  const kernels::Place at = kernels::Place::cuda(0, stream);
  for (std::int64_t n : {0, 1, 1000, 1 << 20}) {
    const auto src = random_values<T>(n, 50);
    const DeviceArray<T> d_src = to_device(src);
    DeviceArray<T> d_dst(static_cast<std::size_t>(n));
    kernels::copy_values(at, d_dst.data(), d_src.data(), n);
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(bitwise_equal(src, d_dst.download())) << "copy of " << n;
    kernels::fill_values(at, d_dst.data(), n, T(-1.5));
    DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(bitwise_equal(std::vector<T>(n, T(-1.5)), d_dst.download())) << "fill of " << n;
  }
  const Shape s{2, 9, 3, 5};
  const auto x = random_values<T>(s.n(), 51);
  std::vector<T> ph(s.n());
  kernels::split_heads_reference(ph.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim);
  const DeviceArray<T> d_x = to_device(x);
  DeviceArray<T> d_ph(static_cast<std::size_t>(s.n()));
  kernels::split_heads(at, d_ph.data(), d_x.data(), s.batch, s.seq, s.heads, s.head_dim);
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_TRUE(bitwise_equal(ph, d_ph.download())) << "split_heads on a device Place";
  DTW_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The checks come before any CUDA call: no GPU needed. The pointers are never
// dereferenced on the host, so a dummy address stands for device memory.
TEST(CudaPermuteArgsTest, RejectsBadArguments) {
  float* p = reinterpret_cast<float*>(std::uintptr_t{256});
  expect_invalid([&] { kernels::device_split_qkv(p, p, p, p, -1, 2, 3, 4); },
                 {"device_split_qkv", "batch -1", "seq 2", "heads 3", "head_dim 4"});
  expect_invalid([&] { kernels::device_join_qkv(p, p, p, p, 1, -2, 3, 4); }, "seq -2");
  expect_invalid([&] { kernels::device_merge_heads(p, p, 1, 2, -3, 4); },
                 {"device_merge_heads", "heads -3"});
  expect_invalid([&] { kernels::device_split_heads(p, p, 1, 2, 3, -4); },
                 {"device_split_heads", "head_dim -4"});
  expect_invalid([&] { kernels::device_copy_values(p, p, -5); }, {"device_copy_values", "-5"});
  expect_invalid([&] { kernels::device_fill_values(p, -6, 0.0f); }, {"device_fill_values", "-6"});
}

}  // namespace
}  // namespace dtw
