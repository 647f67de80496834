// The CUDA vocabulary-slice kernels against the host references, float and
// double: the lookup, its backward (token order), the row maxima and the
// loss's backward bit for bit; the sums of exponentials, the losses,
// probabilities and the mean within a tolerance derived from the operation
// (CUDA's exp is within 2 ulp of T, the sums are a tree in double). Slices at
// the start, middle and end of a vocabulary; one row, odd sizes, and GPT-2's
// 8192 tokens over a 50257-word vocabulary in two slices. Each device call
// is made twice and must give the same bits, and the whole loss once through
// a device Place on a stream of its own. The argument checks run without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dtw/kernels/cuda_vocab_slice.h"
#include "dtw/kernels/vocab_slice.h"
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

struct Case {
  std::int64_t rows, vocab, v0, v1, dim;
};
const std::vector<Case> kCases = {
    {1, 1, 0, 1, 1},     {5, 40, 0, 13, 3},           {37, 40, 13, 29, 65},
    {64, 41, 29, 41, 7}, {8192, 50257, 0, 25129, 64}, {8192, 50257, 25129, 50257, 64}};

// All six pieces of one case on the device; returns their outputs.
template <class T>
std::vector<std::vector<T>> device_all(const Case& c, const std::vector<std::int32_t>& ids,
                                       const std::vector<T>& table, const std::vector<T>& dout,
                                       const std::vector<T>& logits, T* mean,
                                       const kernels::Place* at = nullptr) {
  const std::int64_t cols = c.v1 - c.v0;
  const DeviceArray<std::int32_t> d_ids = to_device(ids);
  const DeviceArray<T> d_table = to_device(table), d_dout = to_device(dout),
                       d_logits = to_device(logits);
  DeviceArray<T> out(c.rows * c.dim), dtable = to_device(std::vector<T>(cols * c.dim, T(0.5))),
                                      max(c.rows), sums(2 * c.rows), probs(c.rows * cols),
                                      losses(c.rows), dl(c.rows * cols);
  const kernels::Place place = at ? *at : kernels::Place::cuda(0);
  kernels::vocab_embedding_forward(place, out.data(), d_ids.data(), d_table.data(), c.rows, c.dim,
                                   c.v0, c.v1);
  kernels::vocab_embedding_backward(place, dtable.data(), d_ids.data(), d_dout.data(), c.rows,
                                    c.dim, c.v0, c.v1);
  kernels::vocab_row_max(place, max.data(), d_logits.data(), c.rows, cols);
  kernels::vocab_exp_sums(place, sums.data(), d_logits.data(), max.data(), d_ids.data(), c.rows,
                          cols, c.v0);
  *mean = kernels::vocab_cross_entropy(place, probs.data(), losses.data(), d_logits.data(),
                                       max.data(), sums.data(), c.rows, cols);
  kernels::vocab_cross_entropy_backward(place, dl.data(), probs.data(), d_ids.data(), c.rows, cols,
                                        c.v0, T(0.25));
  return {out.download(),   dtable.download(), max.download(), sums.download(),
          probs.download(), losses.download(), dl.download()};
}

template <class T>
class CudaVocabSliceTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaVocabSliceTest, kernel_test::RealTypes);

TYPED_TEST(CudaVocabSliceTest, MatchesReference) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  std::uint64_t key = 100;
  for (const Case& c : kCases) {
    DTW_TRACE("rows " << c.rows << ", slice [" << c.v0 << ", " << c.v1 << ") of " << c.vocab);
    const std::int64_t cols = c.v1 - c.v0;
    const auto ids = random_indices(c.rows, c.vocab, key += 10);
    const auto table = random_values<T>(cols * c.dim, key + 1),
               dout = random_values<T>(c.rows * c.dim, key + 2),
               logits = random_values<T>(c.rows * cols, key + 3, 3.0);
    std::vector<T> out(c.rows * c.dim), dtable(cols * c.dim, T(0.5)), max(c.rows), sums(2 * c.rows),
        probs(c.rows * cols), losses(c.rows), dl(c.rows * cols);
    kernels::vocab_embedding_forward_reference(out.data(), ids.data(), table.data(), c.rows, c.dim,
                                               c.v0, c.v1);
    kernels::vocab_embedding_backward_reference(dtable.data(), ids.data(), dout.data(), c.rows,
                                                c.dim, c.v0, c.v1);
    kernels::vocab_row_max_reference(max.data(), logits.data(), c.rows, cols);
    kernels::vocab_exp_sums_reference(sums.data(), logits.data(), max.data(), ids.data(), c.rows,
                                      cols, c.v0);
    const T mean = kernels::vocab_cross_entropy_reference(
        probs.data(), losses.data(), logits.data(), max.data(), sums.data(), c.rows, cols);
    std::vector<T> dl_of_device_probs(c.rows * cols);
    T got_mean[2];
    std::vector<std::vector<T>> got[2];
    for (int run = 0; run < 2; ++run)
      got[run] = device_all(c, ids, table, dout, logits, &got_mean[run]);
    for (std::size_t i = 0; i < got[0].size(); ++i)
      EXPECT_TRUE(bitwise_equal(got[0][i], got[1][i])) << "output " << i << ": second run differs";
    EXPECT_EQ(got_mean[0], got_mean[1]);
    // Bitwise: copies, adds in token order, a maximum.
    EXPECT_TRUE(bitwise_equal(out, got[0][0])) << testing::compare(0, out, got[0][0]);
    EXPECT_TRUE(bitwise_equal(dtable, got[0][1])) << testing::compare(0, dtable, got[0][1]);
    EXPECT_TRUE(bitwise_equal(max, got[0][2])) << testing::compare(0, max, got[0][2]);
    // The loss's backward from the device's own probabilities: bitwise the host's.
    kernels::vocab_cross_entropy_backward_reference(dl_of_device_probs.data(), got[0][4].data(),
                                                    ids.data(), c.rows, cols, c.v0, T(0.25));
    EXPECT_TRUE(bitwise_equal(dl_of_device_probs, got[0][6]));
    // Tolerances from the operations. A sum of `cols` positive terms, each
    // ≤ 1 and within 2 ulp: the host's sequential sum in T is within
    // cols·ε of the true one, relative to the sum (the device's sum in
    // double adds nothing at this scale). A loss, log S + m − l_t, inherits
    // that as an absolute error, plus a rounding of each term; a
    // probability e^(l−m)/S (≤ 1) that relative error plus its own two
    // roundings; the mean, summed in T over the rows on the host, rows·ε of
    // the mean's size more.
    const double eps = std::numeric_limits<T>::epsilon();
    const double sum_tol = static_cast<double>(cols + 2) * eps;
    double loss_tol = 0;
    for (std::int64_t r = 0; r < c.rows; ++r) {
      EXPECT_NEAR(got[0][3][r], sums[r], sum_tol * sums[r]) << "sum of row " << r;
      EXPECT_EQ(got[0][3][c.rows + r], sums[c.rows + r]) << "target logit of row " << r;
      const double tol = sum_tol + 4 * eps * (std::abs(max[r]) + std::abs(losses[r]) + 1);
      loss_tol = std::max(loss_tol, tol);
      EXPECT_NEAR(got[0][5][r], losses[r], tol) << "loss of row " << r;
    }
    const std::string diff = testing::compare(0, probs, got[0][4], sum_tol + 4 * eps);
    EXPECT_TRUE(diff.empty()) << "probs: " << diff;
    EXPECT_NEAR(got_mean[0], mean,
                loss_tol + static_cast<double>(c.rows + 2) * eps * std::abs(mean));
  }
}

TYPED_TEST(CudaVocabSliceTest, ADevicePlaceOnItsOwnStreamGivesTheSameBits) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  const Case c = kCases[2];
  const std::int64_t cols = c.v1 - c.v0;
  const auto ids = random_indices(c.rows, c.vocab, 7);
  const auto table = random_values<T>(cols * c.dim, 8), dout = random_values<T>(c.rows * c.dim, 9),
             logits = random_values<T>(c.rows * cols, 10);
  cudaStream_t stream = nullptr;
  DTW_CUDA_CHECK(cudaStreamCreate(&stream));
  const kernels::Place at = kernels::Place::cuda(0, stream);
  T m1 = 0, m2 = 0;
  const auto a = device_all(c, ids, table, dout, logits, &m1);
  const auto b = device_all(c, ids, table, dout, logits, &m2, &at);
  DTW_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "output " << i;
  EXPECT_EQ(m1, m2);
  DTW_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The checks come before any CUDA call: no GPU needed. The pointers are never
// dereferenced on the host, so a dummy address stands for device memory.
TEST(CudaVocabSliceArgsTest, RejectsBadArguments) {
  float* p = reinterpret_cast<float*>(std::uintptr_t{256});
  auto* ids = reinterpret_cast<const std::int32_t*>(std::uintptr_t{256});
  expect_invalid([&] { kernels::device_vocab_embedding_forward(p, ids, p, -1, 2, 0, 3); },
                 {"device_vocab_embedding_forward", "n -1"});
  expect_invalid([&] { kernels::device_vocab_embedding_backward(p, ids, p, 2, 2, 4, 3); },
                 {"device_vocab_embedding_backward", "[4, 3)"});
  expect_invalid([&] { kernels::device_vocab_row_max(p, p, 2, 0); },
                 {"device_vocab_row_max", "cols 0"});
  expect_invalid([&] { kernels::device_vocab_exp_sums(p, p, p, ids, -2, 3, 0); },
                 {"device_vocab_exp_sums", "rows -2"});
  expect_invalid([&] { kernels::device_vocab_cross_entropy(p, p, p, p, p, 2, -1); },
                 {"device_vocab_cross_entropy", "cols -1"});
  expect_invalid([&] { kernels::device_vocab_cross_entropy_backward(p, p, ids, -1, 3, 0, 1.0f); },
                 {"device_vocab_cross_entropy_backward", "rows -1"});
}

}  // namespace
}  // namespace dtw
