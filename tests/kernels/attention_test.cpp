// Plain (materialised) attention: against the plain-loop twins, against
// values worked out by hand, against finite differences (plain and blockwise),
// bad sizes named in errors, and both kinds from many threads at once. The
// blockwise-only tests are in attention_blockwise_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "dtw/kernels/attention.h"
#include "dtw_test.h"
#include "gradcheck.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

template <class T>
class AttentionTest : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionTest, RealTypes);

TYPED_TEST(AttentionTest, MatchesReferenceOnOddSizes) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c.shape, c.causal));
    const Inputs<T> in(c.shape, 7);
    const Result<T> got = plain(in, c.shape, c.causal);
    Result<T> want(c.shape);
    kernels::attention_forward_reference(want.out.data(), want.probs.data(), in.q.data(),
                                         in.k.data(), in.v.data(), c.shape, c.causal);
    // Both backwards start from the reference probs, so only the backward differs.
    Result<T> got_b = got;
    kernels::attention_backward(got_b.dq.data(), got_b.dk.data(), got_b.dv.data(), in.dout.data(),
                                want.probs.data(), in.q.data(), in.k.data(), in.v.data(), c.shape);
    kernels::attention_backward_reference(want.dq.data(), want.dk.data(), want.dv.data(),
                                          in.dout.data(), want.probs.data(), in.q.data(),
                                          in.k.data(), in.v.data(), c.shape);
    DTW_EXPECT_SAME(0, want.out, got.out, tolerance<T>(c.shape));
    DTW_EXPECT_SAME(0, want.probs, got.probs, tolerance<T>(c.shape));
    expect_same(want, got_b, c.shape, false);
  }
}

// Worked by hand: head_dim 4 (scale 1/2), only the first feature non-zero, so
// row 0's scores are 2·k_j0 and row 1's are k_j0; k_10 = ln 3 makes the
// probabilities simple fractions.
TYPED_TEST(AttentionTest, ComputesHandWorkedExample) {
  using T = TypeParam;
  const AttentionShape s{1, 1, 2, 2, 4};
  const std::vector<T> q{4, 0, 0, 0, 2, 0, 0, 0}, k{0, 0, 0, 0, T(std::log(3.0)), 0, 0, 0};
  const std::vector<T> v{4, 0, 1, -2, 8, 4, 1, 2};
  // Causal: row 0 sees key 0 only (p = 1); row 1 has p = (1/4, 3/4).
  // Non-causal row 0: scores (0, 2 ln 3), p = (1/10, 9/10).
  const std::vector<T> causal_out{4, 0, 1, -2, 7, 3, 1, 1};
  const std::vector<T> full_out{T(7.6), T(3.6), 1, T(1.6), 7, 3, 1, 1};
  const std::vector<T> causal_lse{0, T(std::log(4.0))},
      full_lse{T(std::log(10.0)), T(std::log(4.0))};
  const double tol = 16 * std::numeric_limits<T>::epsilon();
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "non-causal");
    const auto& want = causal ? causal_out : full_out;
    std::vector<T> out(8), probs(4), lse(2);
    kernels::attention_forward_reference(out.data(), probs.data(), q.data(), k.data(), v.data(), s,
                                         causal);
    DTW_EXPECT_SAME(0, want, out, tol);
    kernels::attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), s, causal);
    DTW_EXPECT_SAME(0, want, out, tol);
    kernels::attention_blockwise_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, 1,
                                         causal);
    DTW_EXPECT_SAME(0, want, out, tol);
    DTW_EXPECT_SAME(0, causal ? causal_lse : full_lse, lse, tol);
  }
}

// L = Σ w·out differentiated numerically (double): plain, and blockwise with
// blocks of 1, 3 and ≥ kv_len.
TEST(AttentionGradientTest, BackwardMatchesFiniteDifferences) {
  const Case cases[] = {{{1, 1, 1, 1, 1}, true},
                        {{2, 3, 5, 5, 4}, true},
                        {{1, 2, 7, 7, 1}, true},
                        {{1, 2, 3, 5, 2}, false}};
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    for (std::int64_t block :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, s.kv_len, s.kv_len + 2}) {
      SCOPED_TRACE(describe(s, c.causal) + " block " + std::to_string(block) + " (0: plain)");
      Inputs<double> in(s, 11);  // dout is the projection w
      const auto run = [&] {
        return block == 0 ? plain(in, s, c.causal) : blockwise(in, s, block, c.causal);
      };
      const Result<double> r = run();
      const auto loss = [&] { return testing::project(in.dout, run().out); };
      EXPECT_TRUE(testing::gradients_match("dq", r.dq, testing::numeric_gradient(in.q, loss)));
      EXPECT_TRUE(testing::gradients_match("dk", r.dk, testing::numeric_gradient(in.k, loss)));
      EXPECT_TRUE(testing::gradients_match("dv", r.dv, testing::numeric_gradient(in.v, loss)));
    }
  }
}

TEST(AttentionErrorTest, RejectsBadSizesNamingThem) {
  float* x = nullptr;
  const AttentionShape neg_heads{1, -1, 2, 2, 2}, neg_dim{1, 1, 2, 2, -2}, ragged{1, 1, 4, 5, 2};
  const AttentionShape neg_q{1, 1, -3, 2, 2}, neg_kv{1, 1, 2, -1, 2}, ok{1, 1, 2, 2, 2};
  expect_invalid([&] { kernels::attention_forward(x, x, x, x, x, neg_heads); },
                 {"attention_forward", "heads -1"});
  expect_invalid([&] { kernels::attention_forward(x, x, x, x, x, ragged); },
                 {"attention_forward", "q_len 4", "kv_len 5"});
  expect_invalid([&] { kernels::attention_forward_reference(x, x, x, x, x, ragged); },
                 {"q_len 4", "kv_len 5"});
  expect_invalid([&] { kernels::attention_backward(x, x, x, x, x, x, x, x, neg_dim); },
                 {"attention_backward", "head_dim -2"});
  expect_invalid([&] { kernels::attention_backward_reference(x, x, x, x, x, x, x, x, neg_dim); },
                 {"head_dim -2"});
  expect_invalid([&] { kernels::attention_block_forward(x, x, x, x, x, neg_q, 0, 0); },
                 {"attention_block_forward", "q_len -3"});
  expect_invalid(
      [&] { kernels::attention_block_backward(x, x, x, x, x, x, x, x, x, neg_kv, 0, 0); },
      {"attention_block_backward", "kv_len -1"});
  expect_invalid([&] { kernels::attention_merge(x, x, x, x, -1, 2); }, {"rows -1"});
  expect_invalid([&] { kernels::attention_blockwise_forward(x, x, x, x, x, ok, 0); },
                 {"attention_blockwise_forward", "block 0"});
  expect_invalid([&] { kernels::attention_blockwise_backward(x, x, x, x, x, x, x, x, x, ok, -2); },
                 {"attention_blockwise_backward", "block -2"});
  expect_invalid([&] { kernels::attention_blockwise_forward(x, x, x, x, x, ragged, 2); },
                 {"q_len 4", "kv_len 5"});
}

// Everything a call produces, concatenated: plain and blockwise, forward and backward.
std::vector<float> run_all(const AttentionShape& s) {
  const Inputs<float> in(s, 61);
  const Result<float> a = plain(in, s, true), b = blockwise(in, s, 5, true);
  std::vector<float> all;
  for (const auto* x : {&a.out, &a.probs, &a.dq, &a.dk, &a.dv, &b.out, &b.lse, &b.dq, &b.dk, &b.dv})
    all.insert(all.end(), x->begin(), x->end());
  return all;
}

TEST(AttentionThreadTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  const AttentionShape s{1, 2, 13, 13, 4};
#else
  const AttentionShape s{2, 3, 64, 64, 16};
#endif
  // Every thread makes the same three calls; each must equal a lone call bit for bit.
  expect_concurrent_matches_serial([&s](int) {
    std::vector<std::vector<float>> reps;
    for (int rep = 0; rep < 3; ++rep) reps.push_back(run_all(s));
    return reps;
  });
}

}  // namespace
}  // namespace dtw::kernel_test
