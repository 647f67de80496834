// The CUDA embedding kernels against the host references, float and double:
// 1 token / 1 feature, odd sizes, many repeated ids (one id for every token
// too), and GPT-2's shape (8192 tokens x 768 over a 50257-row table). Every
// output element is checked, and bitwise: the forward copies (or does the
// reference's one add), and the backward adds each element's contributions in
// the reference's order (token order: the sort is stable), so no rounding can
// differ. Each device call is also made twice and must give the same bits.
// The argument checks run without a GPU.
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/kernels/cuda_embedding.h"
#include "dtw/kernels/embedding.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_invalid;
using kernel_test::random_indices;
using kernel_test::random_values;
using testing::DeviceArray;
using testing::to_device;

struct Shape {
  std::int64_t n, dim, rows;
};
// 1x1; odd sizes; more tokens than rows (many repeats); GPT-2's shape.
const std::vector<Shape> kShapes = {{1, 1, 1},     {1, 7, 3},       {5, 1, 2},
                                    {37, 13, 11},  {257, 65, 3},    {1000, 33, 1000},
                                    {8192, 768, 50257}};

template <class T>
void check_forward(const Shape& s, bool accumulate, std::uint64_t key) {
  DTW_TRACE("n " << s.n << ", dim " << s.dim << ", rows " << s.rows << ", accumulate "
                 << accumulate);
  const std::vector<std::int32_t> ids = random_indices(s.n, s.rows, key);
  const std::vector<T> table = random_values<T>(s.rows * s.dim, key + 1);
  // Overwritten: poisoned with NaN, so an element the kernel skips shows.
  // Accumulated into: random values, not zeros.
  const std::vector<T> out0 = accumulate ? random_values<T>(s.n * s.dim, key + 2)
                                         : std::vector<T>(s.n * s.dim, std::nan(""));
  std::vector<T> expected = out0;
  kernels::embedding_forward_reference(expected.data(), ids.data(), table.data(), s.n, s.dim,
                                       s.rows, accumulate);
  DeviceArray<std::int32_t> d_ids = to_device(ids);
  DeviceArray<T> d_table = to_device(table);
  std::vector<T> first;
  for (int run = 0; run < 2; ++run) {
    DeviceArray<T> d_out = to_device(out0);
    kernels::device_embedding_forward(d_out.data(), d_ids.data(), d_table.data(), s.n, s.dim,
                                      s.rows, accumulate);
    const std::vector<T> got = d_out.download();
    // Tolerance 0: a copy is exact, and accumulate does the reference's one
    // add of the same two values.
    const std::string diff = testing::compare(0, expected, got);
    ASSERT_TRUE(diff.empty()) << diff;
    if (run == 0) first = got;
    else EXPECT_TRUE(bitwise_equal(first, got)) << "second run differs";
  }
}

template <class T>
void check_backward(const Shape& s, std::uint64_t key, bool one_id = false) {
  DTW_TRACE("n " << s.n << ", dim " << s.dim << ", rows " << s.rows << ", one id " << one_id);
  std::vector<std::int32_t> ids = random_indices(s.n, s.rows, key);
  if (one_id) ids.assign(ids.size(), static_cast<std::int32_t>(s.rows - 1));
  const std::vector<T> dout = random_values<T>(s.n * s.dim, key + 1);
  // dtable accumulates: random starting values, so rows no id touches must come back unchanged.
  const std::vector<T> dtable0 = random_values<T>(s.rows * s.dim, key + 2);
  std::vector<T> expected = dtable0;
  kernels::embedding_backward_reference(expected.data(), ids.data(), dout.data(), s.n, s.dim,
                                        s.rows);
  DeviceArray<std::int32_t> d_ids = to_device(ids);
  DeviceArray<T> d_dout = to_device(dout);
  std::vector<T> first;
  for (int run = 0; run < 2; ++run) {
    DeviceArray<T> d_dtable = to_device(dtable0);
    kernels::device_embedding_backward(d_dtable.data(), d_ids.data(), d_dout.data(), s.n, s.dim,
                                       s.rows);
    const std::vector<T> got = d_dtable.download();
    // Tolerance 0: each element is the same sequence of IEEE adds in T as
    // the reference's (start value, then the rows of its tokens in token
    // order), and adds are never fused.
    const std::string diff = testing::compare(0, expected, got);
    ASSERT_TRUE(diff.empty()) << diff;
    if (run == 0) first = got;
    else EXPECT_TRUE(bitwise_equal(first, got)) << "second run differs";
  }
}

template <class T>
class CudaEmbeddingTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaEmbeddingTest, kernel_test::RealTypes);

TYPED_TEST(CudaEmbeddingTest, ForwardMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 100;
  for (const Shape& s : kShapes)
    for (bool accumulate : {false, true}) check_forward<TypeParam>(s, accumulate, key += 10);
}

TYPED_TEST(CudaEmbeddingTest, BackwardMatchesReferenceBitwise) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 200;
  for (const Shape& s : kShapes) check_backward<TypeParam>(s, key += 10);
  // Every token the same id: one long run, summed in token order.
  check_backward<TypeParam>({4099, 33, 5}, 300, /*one_id=*/true);
}

TYPED_TEST(CudaEmbeddingTest, ZeroSizesLaunchNothing) {
  DTW_REQUIRE_GPUS(1);
  DeviceArray<TypeParam> out(4);
  DeviceArray<std::int32_t> ids(4);
  const std::vector<TypeParam> before = random_values<TypeParam>(4, 7);
  out.upload(before);
  kernels::device_embedding_forward(out.data(), ids.data(), out.data(), 0, 4, 1);
  kernels::device_embedding_forward<TypeParam>(out.data(), ids.data(), nullptr, 4, 0, 0);
  kernels::device_embedding_backward(out.data(), ids.data(), out.data(), 0, 4, 1);
  EXPECT_TRUE(bitwise_equal(before, out.download()));
}

// Ids out of range on the device: device_embedding_check_ids names the first
// one as the host kernels do; the forward makes that row NaN and the backward
// drops that token (the other rows are still the reference's).
TYPED_TEST(CudaEmbeddingTest, BadIdsAreReportedOrContained) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const std::int64_t dim = 3, rows = 5;
  const std::vector<std::int32_t> ids = {0, 4, 5, 2, -1, 4};
  DeviceArray<std::int32_t> d_ids = to_device(ids);
  expect_invalid([&] { kernels::device_embedding_check_ids(d_ids.data(), 6, rows, "lookup"); },
                 {"lookup", "index 2", "id 5", "[0, 5)"});
  kernels::device_embedding_check_ids(d_ids.data(), 2, rows);  // the first two are good

  const std::vector<T> table = random_values<T>(rows * dim, 11);
  DeviceArray<T> d_table = to_device(table);
  DeviceArray<T> d_out = to_device(std::vector<T>(6 * dim, T(0.5)));
  kernels::device_embedding_forward(d_out.data(), d_ids.data(), d_table.data(), 6, dim, rows);
  const std::vector<T> out = d_out.download();
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t c = 0; c < dim; ++c) {
      const T got = out[i * dim + c];
      if (ids[i] < 0 || ids[i] >= rows) EXPECT_TRUE(std::isnan(got)) << "row " << i;
      else EXPECT_EQ(got, table[ids[i] * dim + c]) << "row " << i << " col " << c;
    }

  const std::vector<T> dout = random_values<T>(6 * dim, 12);
  const std::vector<T> dtable0 = random_values<T>(rows * dim, 13);
  std::vector<T> expected = dtable0;
  for (std::int64_t i = 0; i < 6; ++i)
    if (ids[i] >= 0 && ids[i] < rows)
      kernels::embedding_backward_reference(expected.data(), ids.data() + i,
                                            dout.data() + i * dim, 1, dim, rows);
  DeviceArray<T> d_dout = to_device(dout);
  DeviceArray<T> d_dtable = to_device(dtable0);
  kernels::device_embedding_backward(d_dtable.data(), d_ids.data(), d_dout.data(), 6, dim, rows);
  const std::string diff = testing::compare(0, expected, d_dtable.download());
  EXPECT_TRUE(diff.empty()) << diff;
}

// The checks come before any CUDA call: no GPU needed. The pointers are never
// dereferenced on the host, so a dummy address stands for device memory.
TEST(CudaEmbeddingArgsTest, RejectsBadArguments) {
  float* p = reinterpret_cast<float*>(std::uintptr_t{256});
  auto* ids = reinterpret_cast<const std::int32_t*>(std::uintptr_t{256});
  expect_invalid([&] { kernels::device_embedding_forward(p, ids, p, -3, 4, 5); },
                 {"device_embedding_forward", "n -3", "dim 4", "table_rows 5"});
  expect_invalid([&] { kernels::device_embedding_forward(p, ids, p, 3, -4, 5); }, "dim -4");
  expect_invalid([&] { kernels::device_embedding_backward(p, ids, p, 3, 4, -5); },
                 {"device_embedding_backward", "table_rows -5"});
  expect_invalid([&] { kernels::device_embedding_forward<float>(nullptr, ids, p, 3, 4, 5); },
                 {"null pointer", "n 3", "dim 4"});
  expect_invalid([&] { kernels::device_embedding_backward<double>(nullptr, ids, nullptr, 2, 4, 5); },
                 {"null pointer", "n 2"});
  expect_invalid([&] { kernels::device_embedding_backward(p, ids, p, INT_MAX + 1LL, 1, 5); },
                 {"n 2147483648", "2147483647"});
  expect_invalid([&] { kernels::device_embedding_check_ids(ids, -1, 5); }, "n -1");
}

}  // namespace
}  // namespace dtw
