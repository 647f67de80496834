// Attention, plain and blockwise: against the plain-loop twins, against values
// worked out by hand, against finite differences, against each other (whole
// sequence, and split into ring-style chunks merged in rotated order), on
// blocks that see no key, and from many threads at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dtw/errors.h"
#include "dtw/kernels/attention.h"
#include "dtw_test.h"
#include "gradcheck.h"

namespace dtw {
namespace {

using kernels::AttentionShape;
using ::testing::HasSubstr;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Elements of a [batch, heads, len, width] tensor.
std::int64_t numel(const AttentionShape& s, std::int64_t len, std::int64_t width = 1) {
  return s.batch * s.heads * len * width;
}

std::string describe(const AttentionShape& s, bool causal) {
  std::ostringstream out;
  out << "batch " << s.batch << " heads " << s.heads << " q_len " << s.q_len << " kv_len "
      << s.kv_len << " head_dim " << s.head_dim << (causal ? " causal" : " non-causal");
  return out.str();
}

template <class T>
std::vector<T> random_as(std::int64_t n, std::uint64_t key) {
  const std::vector<double> x = testing::random_vector(n, key);
  return std::vector<T>(x.begin(), x.end());
}

template <class T>
struct Inputs {
  Inputs(const AttentionShape& s, std::uint64_t key)
      : q(random_as<T>(numel(s, s.q_len, s.head_dim), key)),
        k(random_as<T>(numel(s, s.kv_len, s.head_dim), key + 1)),
        v(random_as<T>(numel(s, s.kv_len, s.head_dim), key + 2)),
        dout(random_as<T>(numel(s, s.q_len, s.head_dim), key + 3)) {}
  std::vector<T> q, k, v, dout;
};

template <class T>
struct Result {  // one forward and backward: outputs and input gradients
  explicit Result(const AttentionShape& s)
      : out(size(numel(s, s.q_len, s.head_dim))),
        lse(size(numel(s, s.q_len))),
        probs(size(numel(s, s.q_len) * s.kv_len)),
        dq(size(numel(s, s.q_len, s.head_dim))),
        dk(size(numel(s, s.kv_len, s.head_dim))),
        dv(size(numel(s, s.kv_len, s.head_dim))) {}
  static std::size_t size(std::int64_t n) { return static_cast<std::size_t>(n); }
  std::vector<T> out, lse, probs, dq, dk, dv;
};

template <class T>
Result<T> plain(const Inputs<T>& in, const AttentionShape& s, bool causal) {
  Result<T> r(s);
  kernels::attention_forward(r.out.data(), r.probs.data(), in.q.data(), in.k.data(), in.v.data(), s,
                             causal);
  kernels::attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(), r.probs.data(),
                              in.q.data(), in.k.data(), in.v.data(), s);
  return r;
}

template <class T>
Result<T> blockwise(const Inputs<T>& in, const AttentionShape& s, std::int64_t block, bool causal) {
  Result<T> r(s);
  kernels::attention_blockwise_forward(r.out.data(), r.lse.data(), in.q.data(), in.k.data(),
                                       in.v.data(), s, block, causal);
  kernels::attention_blockwise_backward(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(),
                                        r.out.data(), r.lse.data(), in.q.data(), in.k.data(),
                                        in.v.data(), s, block, causal);
  return r;
}

// log Σ_j exp(scale · q_i·k_j) over the visible keys, in double; −∞ if none.
template <class T>
std::vector<double> expected_lse(const Inputs<T>& in, const AttentionShape& s, bool causal,
                                 std::int64_t q_offset = 0, std::int64_t k_offset = 0) {
  std::vector<double> lse;
  const std::int64_t d = s.head_dim;
  for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
    for (std::int64_t i = 0; i < s.q_len; ++i) {
      std::vector<double> scores;
      for (std::int64_t j = 0; j < s.kv_len; ++j) {
        if (causal && k_offset + j > q_offset + i) continue;
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c)
          dot += double(in.q[Result<T>::size((bh * s.q_len + i) * d + c)]) *
                 double(in.k[Result<T>::size((bh * s.kv_len + j) * d + c)]);
        scores.push_back(d > 0 ? dot / std::sqrt(double(d)) : 0.0);  // 1/√d, 1 for d = 0
      }
      const double max = scores.empty() ? -kInf : *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double x : scores) sum += std::exp(x - max);
      lse.push_back(scores.empty() ? -kInf : max + std::log(sum));
    }
  }
  return lse;
}

template <class T>
void expect_lse(const std::vector<double>& want, const std::vector<T>& got, double tol) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -kInf) {
      EXPECT_EQ(double(got[i]), -kInf) << "lse row " << i;
    } else {
      EXPECT_NEAR(double(got[i]), want[i], tol * std::max(1.0, std::abs(want[i])))
          << "lse row " << i;
    }
  }
}

// Rounding: a score is a dot product of head_dim terms, an output or gradient
// one of ≤ q_len or kv_len terms; each costs ≤ n·ε relative (Higham's γ_n),
// exp/log/divide a few ε more (the +8); ×2 as both sides round. (Observed:
// every case passes at 1/8 of this.)
template <class T>
double tolerance(const AttentionShape& s) {
  return 2.0 * std::numeric_limits<T>::epsilon() * double(s.head_dim + s.q_len + s.kv_len + 8);
}

template <class T>
void expect_same(const Result<T>& want, const Result<T>& got, const AttentionShape& s,
                 bool check_probs) {
  const double tol = tolerance<T>(s);
  DTW_EXPECT_SAME(0, want.out, got.out, tol);
  if (check_probs) DTW_EXPECT_SAME(0, want.probs, got.probs, tol);
  DTW_EXPECT_SAME(0, want.dq, got.dq, tol);
  DTW_EXPECT_SAME(0, want.dk, got.dk, tol);
  DTW_EXPECT_SAME(0, want.dv, got.dv, tol);
}

struct Case {
  AttentionShape shape;
  bool causal;
};
// Sizes 0 and 1, odd lengths, batch 2, heads 3; non-causal with q_len ≠ kv_len.
const Case kCases[] = {
    {{1, 1, 1, 1, 1}, true},   {{2, 3, 7, 7, 5}, true},  {{1, 2, 13, 13, 1}, true},
    {{2, 1, 16, 16, 8}, true}, {{1, 1, 0, 0, 4}, true},  {{0, 2, 3, 3, 2}, true},
    {{1, 1, 5, 5, 0}, true},   {{2, 3, 7, 7, 5}, false}, {{2, 3, 5, 9, 4}, false},
    {{1, 2, 13, 7, 3}, false}, {{1, 1, 1, 1, 1}, false}, {{1, 1, 4, 0, 3}, false}};

template <class T>
class AttentionTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AttentionTest, FloatTypes);

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

TYPED_TEST(AttentionTest, BlockwiseMatchesPlainForEveryBlockSize) {
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

// Rows [r0, r0 + n) of every head of a [bh, len, width] tensor, and back.
template <class T>
std::vector<T> take_rows(const std::vector<T>& x, std::int64_t bh, std::int64_t len,
                         std::int64_t width, std::int64_t r0, std::int64_t n) {
  std::vector<T> part;
  for (std::int64_t h = 0; h < bh; ++h)
    part.insert(part.end(), x.begin() + (h * len + r0) * width,
                x.begin() + (h * len + r0 + n) * width);
  return part;
}
template <class T>
void put_rows(std::vector<T>& x, const std::vector<T>& part, std::int64_t bh, std::int64_t len,
              std::int64_t width, std::int64_t r0, std::int64_t n) {
  for (std::int64_t h = 0; h < bh; ++h)
    std::copy(part.begin() + h * n * width, part.begin() + (h + 1) * n * width,
              x.begin() + (h * len + r0) * width);
}

// As ring attention runs it: P ranks each hold a chunk of q and of k/v; at
// step t rank r holds the k/v chunk of rank r − t and merges that block in.
TYPED_TEST(AttentionTest, RingOfChunksInRotatedOrderMatchesPlain) {
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
TYPED_TEST(AttentionTest, RowsThatSeeNoKeyGiveMinusInfinityAndNoNaN) {
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

TYPED_TEST(AttentionTest, MergeIsOrderFreeAndHandlesMinusInfinity) {
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

template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no InvalidArgument; expected one mentioning '" << needles[0] << "'";
  } catch (const InvalidArgument& e) {
    for (const auto& needle : needles) EXPECT_THAT(e.what(), HasSubstr(needle));
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
  const std::vector<float> serial = run_all(s);
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < mismatches.size(); ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        const std::vector<float> got = run_all(s);  // bitwise: same code, same inputs
        mismatches[t] += std::memcmp(got.data(), serial.data(), got.size() * sizeof(float)) != 0;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(8, 0))
      << "calls that differ from the serial result, per thread";
}

}  // namespace
}  // namespace dtw
