// The CUDA attention kernels (cuda_attention.h) against the host's: plain
// forward and backward against the plain-loop references; block forward,
// merge, block backward and the blockwise forms against the host kernels
// (which attention_blockwise_test.cpp checks against plain attention). Every
// output is poisoned with NaN first where overwritten, every element compared,
// and every device call repeated to be bitwise equal. Argument checks need no GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "dtw/kernels/attention.h"
#include "dtw/kernels/cuda_attention.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

using testing::DeviceArray;
using testing::to_device;

template <class T>
DeviceArray<T> poisoned(std::size_t n) {
  return to_device(std::vector<T>(n, std::numeric_limits<T>::quiet_NaN()));
}

// Device against host: the γ_n bound of attention_test_util.h's tolerance()
// (n = head_dim + q_len + kv_len + 8: a score sums head_dim terms, a softmax
// or output ≤ kv_len, a dk/dv ≤ q_len; exp/log/divide a few ε; ×2 as both
// sides round) is relative to Σ|terms|, and compare() scales by
// max(1, |expected|). In the gradients dP_ij = dout_i · v_j is a sum of
// head_dim products of N(0,1) values (standard deviation √head_dim), so the
// terms outgrow the result by about that: hence the factor 1 + √head_dim.
template <class T>
double device_tolerance(const AttentionShape& s) {
  return tolerance<T>(s) * (1.0 + std::sqrt(double(s.head_dim)));
}

// compare() with ±∞ (an lse of a row that sees no key) required exactly.
template <class T>
void expect_close(const std::vector<T>& want, const std::vector<T>& got, double tol,
                  const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = want[i], g = got[i];
    const bool ok = std::isfinite(e) ? std::abs(e - g) <= tol * std::max(1.0, std::abs(e)) : e == g;
    ASSERT_TRUE(ok) << what << " index " << i << ": expected " << e << ", got " << g;
  }
}
template <class T>
void expect_bitwise(const std::vector<T>& first, const std::vector<T>& second, const char* what) {
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    ASSERT_TRUE(first[i] == second[i] || (std::isnan(first[i]) && std::isnan(second[i])))
        << what << " differs between two runs at index " << i;
}

// kCases (sizes 0 and 1, odd lengths, head_dim 0 and 1, q_len ≠ kv_len) plus
// lengths over one 128-row tile, and batch 2, heads 4, len 257, head_dim 64.
std::vector<Case> device_cases() {
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({{1, 3, 130, 129, 2}, false});
  cases.push_back({{1, 1, 200, 200, 1}, true});
  cases.push_back({{2, 4, 257, 257, 64}, true});
  return cases;
}

template <class T>
class CudaAttentionTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaAttentionTest, RealTypes);

TYPED_TEST(CudaAttentionTest, PlainMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const Case& c : device_cases()) {
    const AttentionShape& s = c.shape;
    SCOPED_TRACE(describe(s, c.causal));
    const Inputs<T> in(s, 41);
    Result<T> want(s);
    kernels::attention_forward_reference(want.out.data(), want.probs.data(), in.q.data(),
                                         in.k.data(), in.v.data(), s, c.causal);
    kernels::attention_backward_reference(want.dq.data(), want.dk.data(), want.dv.data(),
                                          in.dout.data(), want.probs.data(), in.q.data(),
                                          in.k.data(), in.v.data(), s);
    auto q = to_device(in.q), k = to_device(in.k), v = to_device(in.v), dout = to_device(in.dout);
    auto probs_in = to_device(want.probs);  // the backward starts from the reference probs
    Result<T> runs[2] = {Result<T>(s), Result<T>(s)};
    for (Result<T>& got : runs) {
      auto out = poisoned<T>(got.out.size()), probs = poisoned<T>(got.probs.size());
      auto dq = poisoned<T>(got.dq.size()), dk = poisoned<T>(got.dk.size()),
           dv = poisoned<T>(got.dv.size());
      kernels::device_attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), s,
                                        c.causal);
      kernels::device_attention_backward(dq.data(), dk.data(), dv.data(), dout.data(),
                                         probs_in.data(), q.data(), k.data(), v.data(), s);
      got.out = out.download(), got.probs = probs.download();
      got.dq = dq.download(), got.dk = dk.download(), got.dv = dv.download();
    }
    const double tol = device_tolerance<T>(s);
    expect_close(want.out, runs[0].out, tol, "out");
    expect_close(want.probs, runs[0].probs, tol, "probs");
    expect_close(want.dq, runs[0].dq, tol, "dq");
    expect_close(want.dk, runs[0].dk, tol, "dk");
    expect_close(want.dv, runs[0].dv, tol, "dv");
    for (auto m :
         {&Result<T>::out, &Result<T>::probs, &Result<T>::dq, &Result<T>::dk, &Result<T>::dv})
      expect_bitwise(runs[0].*m, runs[1].*m, "plain attention");
  }
}

// One block of a ring step: positions as offsets, so q_len ≠ kv_len with causal.
struct OffsetCase {
  AttentionShape shape;
  std::int64_t q_offset, k_offset;
  bool causal;
};
const OffsetCase kOffsetCases[] = {
    {{2, 3, 5, 7, 4}, 7, 3, true},       // partly visible: row 0 sees 5 keys, row 4 all 7
    {{1, 2, 6, 4, 3}, 0, 10, true},      // fully masked: every row out 0, lse −∞
    {{1, 2, 6, 4, 3}, 3, 5, true},       // rows 0, 1 masked, the rest partly visible
    {{2, 1, 9, 130, 1}, 200, 0, true},   // all visible, head_dim 1, over one key tile
    {{1, 3, 4, 5, 2}, 0, 100, false},    // non-causal ignores positions
    {{1, 1, 3, 0, 2}, 0, 0, false},      // no keys: lse −∞
    {{2, 4, 257, 257, 64}, 0, 0, true},  // the larger shape
};

TYPED_TEST(CudaAttentionTest, BlockForwardAndBackwardMatchHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const OffsetCase& c : kOffsetCases) {
    const AttentionShape& s = c.shape;
    SCOPED_TRACE(describe(s, c.causal) + " q_offset " + std::to_string(c.q_offset) + " k_offset " +
                 std::to_string(c.k_offset));
    const Inputs<T> in(s, 43);
    Result<T> want(s);
    // Gradients accumulate: they start from random values, not zeros.
    const std::vector<T> dq0 = random_values<T>(numel(s, s.q_len, s.head_dim), 50),
                         dk0 = random_values<T>(numel(s, s.kv_len, s.head_dim), 51),
                         dv0 = random_values<T>(numel(s, s.kv_len, s.head_dim), 52);
    want.dq = dq0, want.dk = dk0, want.dv = dv0;
    // This block is the row's only one, so its (out, lse) are the final ones.
    kernels::attention_block_forward(want.out.data(), want.lse.data(), in.q.data(), in.k.data(),
                                     in.v.data(), s, c.q_offset, c.k_offset, c.causal);
    kernels::attention_block_backward(want.dq.data(), want.dk.data(), want.dv.data(),
                                      in.dout.data(), want.out.data(), want.lse.data(), in.q.data(),
                                      in.k.data(), in.v.data(), s, c.q_offset, c.k_offset,
                                      c.causal);
    auto q = to_device(in.q), k = to_device(in.k), v = to_device(in.v), dout = to_device(in.dout);
    auto out_in = to_device(want.out), lse_in = to_device(want.lse);
    Result<T> runs[2] = {Result<T>(s), Result<T>(s)};
    for (Result<T>& got : runs) {
      auto out = poisoned<T>(got.out.size()), lse = poisoned<T>(got.lse.size());
      auto dq = to_device(dq0), dk = to_device(dk0), dv = to_device(dv0);
      kernels::device_attention_block_forward(out.data(), lse.data(), q.data(), k.data(), v.data(),
                                              s, c.q_offset, c.k_offset, c.causal);
      kernels::device_attention_block_backward(dq.data(), dk.data(), dv.data(), dout.data(),
                                               out_in.data(), lse_in.data(), q.data(), k.data(),
                                               v.data(), s, c.q_offset, c.k_offset, c.causal);
      got.out = out.download(), got.lse = lse.download();
      got.dq = dq.download(), got.dk = dk.download(), got.dv = dv.download();
    }
    const double tol = device_tolerance<T>(s);
    expect_close(want.out, runs[0].out, tol, "out");
    expect_lse(expected_lse(in, s, c.causal, c.q_offset, c.k_offset), runs[0].lse, tol);
    expect_close(want.dq, runs[0].dq, tol, "dq");
    expect_close(want.dk, runs[0].dk, tol, "dk");
    expect_close(want.dv, runs[0].dv, tol, "dv");
    for (auto m :
         {&Result<T>::out, &Result<T>::lse, &Result<T>::dq, &Result<T>::dk, &Result<T>::dv})
      expect_bitwise(runs[0].*m, runs[1].*m, "block attention");
  }
}

TYPED_TEST(CudaAttentionTest, MergeMatchesHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  for (std::int64_t d : {1, 5, 64}) {
    const std::int64_t rows = 301;
    SCOPED_TRACE("head_dim " + std::to_string(d));
    std::vector<T> out = random_values<T>(rows * d, 60), out_b = random_values<T>(rows * d, 61);
    std::vector<T> lse = random_values<T>(rows, 62, 3.0), lse_b = random_values<T>(rows, 63, 3.0);
    // −∞ on one side, the other, and both (row 0).
    for (std::int64_t i = 0; i < rows; i += 5) lse[i] = T(-kInfinity);
    for (std::int64_t i = 0; i < rows; i += 7) lse_b[i] = T(-kInfinity);
    double big_lse = 0, big_out = 1;
    for (T x : lse)
      big_lse = std::isfinite(double(x)) ? std::max(big_lse, std::abs(double(x))) : big_lse;
    for (T x : lse_b)
      big_lse = std::isfinite(double(x)) ? std::max(big_lse, std::abs(double(x))) : big_lse;
    for (T x : out) big_out = std::max(big_out, std::abs(double(x)));
    for (T x : out_b) big_out = std::max(big_out, std::abs(double(x)));
    auto d_out_b = to_device(out_b), d_lse_b = to_device(lse_b);
    std::vector<T> got_out[2], got_lse[2];
    for (int run = 0; run < 2; ++run) {
      auto d_out = to_device(out), d_lse = to_device(lse);
      kernels::device_attention_merge(d_out.data(), d_lse.data(), d_out_b.data(), d_lse_b.data(),
                                      rows, d);
      got_out[run] = d_out.download(), got_lse[run] = d_lse.download();
    }
    kernels::attention_merge(out.data(), lse.data(), out_b.data(), lse_b.data(), rows, d);
    // Both sides evaluate hi + log1p(e^{lo−hi}), two e^x and w·o + w_b·o_b:
    // ≤ 8 roundings, the exponents' absolute error ε·|lse| turning into a
    // relative error of the weights; outputs scale with max|o|; ×2 sides.
    const double eps = std::numeric_limits<T>::epsilon();
    const double tol = 2 * 8 * eps * (1 + big_lse) * big_out;
    expect_close(lse, got_lse[0], tol, "lse");
    expect_close(out, got_out[0], tol, "out");
    expect_bitwise(got_lse[0], got_lse[1], "merged lse");
    expect_bitwise(got_out[0], got_out[1], "merged out");
  }
}

TYPED_TEST(CudaAttentionTest, BlockwiseMatchesHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  for (const Case& c : device_cases()) {
    const AttentionShape& s = c.shape;
    const Inputs<T> in(s, 47);
    auto q = to_device(in.q), k = to_device(in.k), v = to_device(in.v), dout = to_device(in.dout);
    const bool large = s.kv_len > 100;
    for (std::int64_t block : {std::int64_t{1}, std::int64_t{3}, std::int64_t{64}, s.kv_len + 3}) {
      if (large && block < 64) continue;  // 257 blocks of one row add nothing but time
      SCOPED_TRACE(describe(s, c.causal) + " block " + std::to_string(block));
      Result<T> want(s);
      kernels::attention_blockwise_forward(want.out.data(), want.lse.data(), in.q.data(),
                                           in.k.data(), in.v.data(), s, block, c.causal);
      kernels::attention_blockwise_backward(
          want.dq.data(), want.dk.data(), want.dv.data(), in.dout.data(), want.out.data(),
          want.lse.data(), in.q.data(), in.k.data(), in.v.data(), s, block, c.causal);
      // The backward starts from the host's out and lse: only the backward differs.
      auto out_in = to_device(want.out), lse_in = to_device(want.lse);
      Result<T> runs[2] = {Result<T>(s), Result<T>(s)};
      for (Result<T>& got : runs) {
        auto out = poisoned<T>(got.out.size()), lse = poisoned<T>(got.lse.size());
        auto dq = poisoned<T>(got.dq.size()), dk = poisoned<T>(got.dk.size()),
             dv = poisoned<T>(got.dv.size());
        kernels::device_attention_blockwise_forward(out.data(), lse.data(), q.data(), k.data(),
                                                    v.data(), s, block, c.causal);
        kernels::device_attention_blockwise_backward(dq.data(), dk.data(), dv.data(), dout.data(),
                                                     out_in.data(), lse_in.data(), q.data(),
                                                     k.data(), v.data(), s, block, c.causal);
        got.out = out.download(), got.lse = lse.download();
        got.dq = dq.download(), got.dk = dk.download(), got.dv = dv.download();
      }
      const double tol = device_tolerance<T>(s);
      expect_close(want.out, runs[0].out, tol, "out");
      expect_close(want.lse, runs[0].lse, tol, "lse");
      expect_close(want.dq, runs[0].dq, tol, "dq");
      expect_close(want.dk, runs[0].dk, tol, "dk");
      expect_close(want.dv, runs[0].dv, tol, "dv");
      for (auto m :
           {&Result<T>::out, &Result<T>::lse, &Result<T>::dq, &Result<T>::dk, &Result<T>::dv})
        expect_bitwise(runs[0].*m, runs[1].*m, "blockwise attention");
    }
  }
}

// The host's checks, before any CUDA call: passes without a GPU.
TEST(CudaAttentionArgsTest, RejectsBadSizesNamingThem) {
  float* p = nullptr;
  using kernels::device_attention_backward, kernels::device_attention_block_backward;
  expect_invalid(
      [&] {
        kernels::device_attention_forward(p, p, p, p, p, {1, 1, -2, 3, 4});
      },
      {"device_attention_forward", "q_len -2"});
  expect_invalid(
      [&] {
        kernels::device_attention_forward(p, p, p, p, p, {1, 1, 3, 4, 2}, true);
      },
      {"q_len 3", "kv_len 4"});
  expect_invalid(
      [&] {
        device_attention_backward(p, p, p, p, p, p, p, p, {-1, 1, 2, 2, 2});
      },
      {"device_attention_backward", "batch -1"});
  expect_invalid(
      [&] {
        kernels::device_attention_block_forward(p, p, p, p, p, {1, 1, 2, 3, -5}, 0, 0);
      },
      {"device_attention_block_forward", "head_dim -5"});
  expect_invalid([&] { kernels::device_attention_merge(p, p, p, p, -3, 4); },
                 {"device_attention_merge", "rows -3", "head_dim 4"});
  expect_invalid(
      [&] {
        device_attention_block_backward(p, p, p, p, p, p, p, p, p, {1, -2, 2, 2, 2}, 0, 0);
      },
      {"device_attention_block_backward", "heads -2"});
  expect_invalid(
      [&] {
        kernels::device_attention_blockwise_forward(p, p, p, p, p, {1, 1, 2, 2, 2}, 0);
      },
      {"device_attention_blockwise_forward", "block 0"});
  expect_invalid(
      [&] {
        kernels::device_attention_blockwise_backward(p, p, p, p, p, p, p, p, p, {1, 1, 5, 6, 2}, 2);
      },
      {"device_attention_blockwise_backward", "q_len 5", "kv_len 6"});
}

}  // namespace
}  // namespace dtw::kernel_test
