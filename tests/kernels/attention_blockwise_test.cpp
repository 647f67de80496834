// Blockwise attention: against plain attention for every block size, split
// into ring-style chunks merged in rotated order, on blocks that see no key,
// and the log-sum-exp merge on its own (order-free, −∞ handled).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "dtw/kernels/attention.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

template <class T>
class AttentionBlockwiseTest : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionBlockwiseTest, RealTypes);

TYPED_TEST(AttentionBlockwiseTest, BlockwiseMatchesPlainForEveryBlockSize) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    const Inputs<T> in(c.shape, 21);
    const Result<T> want = plain(in, c.shape, c.causal);
    const std::vector<double> lse = expected_lse(in, c.shape, c.causal);
    for (std::int64_t block : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{5},
                               c.shape.kv_len, c.shape.kv_len + 3}) {
      if (block <= 0) continue;
      SCOPED_TRACE(describe(c.shape, c.causal) + " block " + std::to_string(block));
      const Result<T> got = blockwise(in, c.shape, block, c.causal);
      expect_same(want, got, c.shape, false);
      expect_lse(lse, got.lse, tolerance<T>(c.shape));
    }
  }
}

// As ring attention runs it: P ranks each hold a chunk of q and of k/v; at
// step t rank r holds the k/v chunk of rank r − t and merges that block in.
TYPED_TEST(AttentionBlockwiseTest, RingOfChunksInRotatedOrderMatchesPlain) {
  using T = TypeParam;
  const Case cases[] = {{{2, 3, 13, 13, 4}, true}, {{1, 3, 13, 10, 3}, false}};
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    const std::int64_t bh = s.batch * s.heads, d = s.head_dim;
    const Inputs<T> in(s, 31);
    const Result<T> want = plain(in, s, c.causal);
    for (std::int64_t ranks : {3, 4}) {
      SCOPED_TRACE(describe(s, c.causal) + " ranks " + std::to_string(ranks));
      // Uneven chunks: 13 rows over 3 or 4 ranks.
      const auto q0 = [&](std::int64_t r) { return r * s.q_len / ranks; };
      const auto k0 = [&](std::int64_t r) { return r * s.kv_len / ranks; };
      Result<T> got(s);
      std::vector<std::vector<T>> dk(ranks), dv(ranks);  // per k/v chunk, summed over q chunks
      for (std::int64_t r = 0; r < ranks; ++r)
        dk[r] = dv[r] = std::vector<T>(bh * (k0(r + 1) - k0(r)) * d);
      for (std::int64_t r = 0; r < ranks; ++r) {
        const std::int64_t nq = q0(r + 1) - q0(r);
        const auto chunk_q = take_rows(in.q, bh, s.q_len, d, q0(r), nq);
        const auto chunk_dout = take_rows(in.dout, bh, s.q_len, d, q0(r), nq);
        // Accumulators start empty (lse −∞): merging into them is a copy.
        std::vector<T> out(chunk_q.size(), T(0)), lse(static_cast<std::size_t>(bh * nq), -kInf);
        std::vector<T> out_b = out, lse_b = lse, dq(chunk_q.size(), T(0));
        for (int pass = 0; pass < 2; ++pass) {
          for (std::int64_t t = 0; t < ranks; ++t) {
            const std::int64_t src = (r - t + ranks) % ranks, nk = k0(src + 1) - k0(src);
            const AttentionShape bs{s.batch, s.heads, nq, nk, d};
            const auto chunk_k = take_rows(in.k, bh, s.kv_len, d, k0(src), nk);
            const auto chunk_v = take_rows(in.v, bh, s.kv_len, d, k0(src), nk);
            if (pass == 0) {
              kernels::attention_block_forward(out_b.data(), lse_b.data(), chunk_q.data(),
                                               chunk_k.data(), chunk_v.data(), bs, q0(r), k0(src),
                                               c.causal);
              kernels::attention_merge(out.data(), lse.data(), out_b.data(), lse_b.data(), bh * nq,
                                       d);
            } else {  // backward needs the final out and lse of the q chunk
              kernels::attention_block_backward(dq.data(), dk[src].data(), dv[src].data(),
                                                chunk_dout.data(), out.data(), lse.data(),
                                                chunk_q.data(), chunk_k.data(), chunk_v.data(), bs,
                                                q0(r), k0(src), c.causal);
            }
          }
        }
        put_rows(got.out, out, bh, s.q_len, d, q0(r), nq);
        put_rows(got.lse, lse, bh, s.q_len, 1, q0(r), nq);
        put_rows(got.dq, dq, bh, s.q_len, d, q0(r), nq);
      }
      for (std::int64_t r = 0; r < ranks; ++r) {
        put_rows(got.dk, dk[r], bh, s.kv_len, d, k0(r), k0(r + 1) - k0(r));
        put_rows(got.dv, dv[r], bh, s.kv_len, d, k0(r), k0(r + 1) - k0(r));
      }
      expect_same(want, got, s, false);
      expect_lse(expected_lse(in, s, c.causal), got.lse, tolerance<T>(s));
    }
  }
}

// A block wholly in the future of every query, and one in the future of the
// first rows only: those rows get lse −∞ and output 0, and nothing is NaN.
TYPED_TEST(AttentionBlockwiseTest, RowsThatSeeNoKeyGiveMinusInfinityAndNoNaN) {
  using T = TypeParam;
  const AttentionShape s{2, 3, 4, 5, 3};
  const Inputs<T> in(s, 41);
  for (std::int64_t k_offset : {4, 9, 2}) {  // keys at 4.., 9..: all future; 2..: rows 0, 1
    SCOPED_TRACE("k_offset " + std::to_string(k_offset));
    Result<T> r(s);
    std::fill(r.out.begin(), r.out.end(), std::numeric_limits<T>::quiet_NaN());
    kernels::attention_block_forward(r.out.data(), r.lse.data(), in.q.data(), in.k.data(),
                                     in.v.data(), s, 0, k_offset);
    expect_lse(expected_lse(in, s, true, 0, k_offset), r.lse, tolerance<T>(s));
    // Its own final result (the only block), so the backward is the true gradient.
    kernels::attention_block_backward(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(),
                                      r.out.data(), r.lse.data(), in.q.data(), in.k.data(),
                                      in.v.data(), s, 0, k_offset);
    for (const auto* x : {&r.out, &r.dq, &r.dk, &r.dv})
      EXPECT_TRUE(std::none_of(x->begin(), x->end(), [](T y) { return std::isnan(y); }));
    for (std::size_t i = 0; i < r.out.size(); ++i) {
      const std::size_t row = i / static_cast<std::size_t>(s.head_dim);
      if (r.lse[row] != -kInf) continue;
      EXPECT_TRUE(r.out[i] == T(0) && r.dq[i] == T(0)) << "row " << row;
    }
    if (k_offset >= s.q_len) {
      EXPECT_TRUE(std::all_of(r.dk.begin(), r.dk.end(), [](T y) { return y == T(0); }));
      EXPECT_TRUE(std::all_of(r.dv.begin(), r.dv.end(), [](T y) { return y == T(0); }));
    }
  }
}

TYPED_TEST(AttentionBlockwiseTest, MergeIsOrderFreeAndHandlesMinusInfinity) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const double eps = 8 * std::numeric_limits<T>::epsilon();
  // Masses 1 and 3: lse log 4, out weighted 1/4 and 3/4; rows 2-4 have −∞ on
  // the right, the left, both; row 5 has lse 1000 on both sides (no overflow).
  std::vector<T> out{1, 2, 7, 8, 0, 0, 0, 0, 3, 5}, lse{0, 1, -inf, -inf, 1000};
  const std::vector<T> out_b{5, 6, 9, 9, 3, 4, 0, 0, 5, 7},
      lse_b{T(std::log(3.0)), -inf, 2, -inf, 1000};
  kernels::attention_merge(out.data(), lse.data(), out_b.data(), lse_b.data(), 5, 2);
  DTW_EXPECT_SAME(0, (std::vector<T>{4, 5, 7, 8, 3, 4, 0, 0}),
                  std::vector<T>(out.begin(), out.begin() + 8), eps);
  EXPECT_NEAR(double(lse[0]), std::log(4.0), eps);
  EXPECT_EQ(lse[1], T(1));
  EXPECT_EQ(lse[2], T(2));
  EXPECT_EQ(lse[3], -inf);
  // lse' ≈ 1000 carries an absolute rounding error of ε·1000, and so do the
  // weights e^{lse − lse'}.
  EXPECT_NEAR(double(lse[4]), 1000 + std::log(2.0), 1000 * eps);
  DTW_EXPECT_SAME(0, (std::vector<T>{4, 6}), std::vector<T>(out.begin() + 8, out.end()),
                  1000 * eps);
  // Three key blocks merged in all six orders give the plain result.
  const AttentionShape s{1, 2, 5, 9, 3};
  const Inputs<T> in(s, 51);
  const Result<T> want = plain(in, s, false);
  std::vector<std::int64_t> order{0, 1, 2};
  do {
    std::vector<T> acc(want.out.size(), T(0)), acc_lse(10, -inf), part = acc, part_lse = acc_lse;
    for (std::int64_t b : order) {
      const auto k = take_rows(in.k, 2, 9, 3, 3 * b, 3), v = take_rows(in.v, 2, 9, 3, 3 * b, 3);
      kernels::attention_block_forward(part.data(), part_lse.data(), in.q.data(), k.data(),
                                       v.data(), AttentionShape{1, 2, 5, 3, 3}, 0, 3 * b, false);
      kernels::attention_merge(acc.data(), acc_lse.data(), part.data(), part_lse.data(), 10, 3);
    }
    DTW_EXPECT_SAME(0, want.out, acc, tolerance<T>(s));
  } while (std::next_permutation(order.begin(), order.end()));
}

}  // namespace
}  // namespace dtw::kernel_test
