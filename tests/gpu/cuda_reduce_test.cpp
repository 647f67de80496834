// The CUDA reduce_into against the CPU reference: every op and element type,
// counts around the 16-byte vector width, pointers at every relative alignment
// (vector path, misaligned head, scalar-only path), and a throughput sanity
// check that the kernel runs at memory speed. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/kernels/cuda_reduce.h"
#include "dtw/kernels/reduce.h"
#include "dtw_test.h"
#include "gpu_test.h"

namespace dtw {
namespace {

using testing::DeviceArray;

const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                    ReduceOp::kMax, ReduceOp::kAvg};
// 0 and 1; just below, at and above one and two 16-byte vectors of every type;
// a prime; and a large count with a tail.
const std::vector<std::int64_t> kCounts = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1009, (1 << 20) + 3};

// Small values (|x| <= 3) so products never overflow an integer.
template <class T>
std::vector<T> values(std::int64_t n, int seed) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(((i * 7 + seed * 13) % 7) - 3);
  return v;
}

template <class T>
void check_kernel() {
  // Offsets 0-3 elements into each buffer: equal offsets take the vector path
  // after a scalar head, unequal ones (for types narrower than 16 bytes) the scalar path.
  for (ReduceOp op : kOps) {
    for (std::int64_t n : kCounts) {
      for (int dst_off = 0; dst_off < 4; ++dst_off) {
        for (int src_off = 0; src_off < 4; ++src_off) {
          if (n > 5000 && (dst_off > 1 || src_off > 1)) continue;  // large: offsets 0/1 suffice
          std::vector<T> dst = values<T>(n + dst_off, 1), src = values<T>(n + src_off, 2);
          DeviceArray<T> d_dst(dst.size()), d_src(src.size());
          d_dst.upload(dst);
          d_src.upload(src);
          kernels::device_reduce_into(d_dst.data() + dst_off, d_src.data() + src_off, n, op);
          kernels::reduce_into_reference(dst.data() + dst_off, src.data() + src_off, n, op);
          const std::string diff = testing::compare(0, dst, d_dst.download());
          ASSERT_TRUE(diff.empty()) << name_of(data_type_of<T>()) << " " << name_of(op) << " count "
                                    << n << " dst offset " << dst_off << " src offset " << src_off
                                    << ": " << diff;
        }
      }
    }
  }
}

TEST(CudaReduceTest, MatchesReferenceFloat) {
  DTW_REQUIRE_GPUS(1);
  check_kernel<float>();
}
TEST(CudaReduceTest, MatchesReferenceDouble) {
  DTW_REQUIRE_GPUS(1);
  check_kernel<double>();
}
TEST(CudaReduceTest, MatchesReferenceInt32) {
  DTW_REQUIRE_GPUS(1);
  check_kernel<std::int32_t>();
}
TEST(CudaReduceTest, MatchesReferenceInt64) {
  DTW_REQUIRE_GPUS(1);
  check_kernel<std::int64_t>();
}

TEST(CudaReduceTest, RejectsMismatchedBuffers) {
  DTW_REQUIRE_GPUS(1);
  DeviceArray<float> a(4), b(4);
  EXPECT_THROW(kernels::device_reduce_into(Buffer{a.data(), 4, DataType::kFloat32},
                                           ConstBuffer{b.data(), 3, DataType::kFloat32}, ReduceOp::kSum),
               InvalidArgument);
  EXPECT_THROW(kernels::device_reduce_into(Buffer{a.data(), 4, DataType::kByte},
                                           ConstBuffer{b.data(), 4, DataType::kByte}, ReduceOp::kSum),
               InvalidArgument);
  EXPECT_THROW(kernels::device_reduce_into(a.data(), b.data(), -1, ReduceOp::kSum), InvalidArgument);
}

// Seconds per call of `fn` (after a warm-up), timed with events on the default stream.
template <class F>
double seconds_per_call(F&& fn, int reps) {
  fn();
  cudaEvent_t start, stop;
  DTW_CUDA_CHECK(cudaEventCreate(&start));
  DTW_CUDA_CHECK(cudaEventCreate(&stop));
  DTW_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) fn();
  DTW_CUDA_CHECK(cudaEventRecord(stop));
  DTW_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  DTW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / reps;
}

// A memory-bound kernel must stream close to copy speed. Counted as bytes
// moved: the reduction reads two arrays and writes one, the copy reads one and
// writes one. The benchmark (dtw_bench_gpu) holds it to 85%; this sanity check
// to 60%, so a loaded shared GPU does not make it flaky.
TEST(CudaReduceTest, RunsNearCopyBandwidth) {
  DTW_REQUIRE_GPUS(1);
  const std::size_t n = 64u << 20;  // 256 MiB of float
  DeviceArray<float> a(n), b(n);
  // Data, not zeros (zeros can flatter a memory-bound kernel): values in
  // [0.75, 1.25) stay finite and normal over the 22 passes that sum b into a.
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = 0.75f + static_cast<float>(i % 509) / 1018.0f;
  a.upload(values);
  b.upload(values);
  const double t_reduce = seconds_per_call(
      [&] { kernels::device_reduce_into(a.data(), b.data(), static_cast<std::int64_t>(n), ReduceOp::kSum); }, 10);
  const double t_copy = seconds_per_call(
      [&] { DTW_CUDA_CHECK(cudaMemcpy(a.data(), b.data(), n * sizeof(float), cudaMemcpyDeviceToDevice)); }, 10);
  const double reduce_bw = 3.0 * n * sizeof(float) / t_reduce, copy_bw = 2.0 * n * sizeof(float) / t_copy;
  RecordProperty("reduce_GBps", std::to_string(reduce_bw / 1e9));
  RecordProperty("copy_GBps", std::to_string(copy_bw / 1e9));
  EXPECT_GE(reduce_bw, 0.6 * copy_bw) << "reduce_into " << reduce_bw / 1e9 << " GB/s vs device copy "
                                      << copy_bw / 1e9 << " GB/s";
}

}  // namespace
}  // namespace dtw
