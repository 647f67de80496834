// Helpers shared by attention_test.cpp (plain attention) and
// attention_blockwise_test.cpp (blockwise, merge, ring-style chunks): random
// inputs, one forward + backward of either kind, the expected log-sum-exp,
// tolerances and the cases swept. The generic ones are in kernel_test_util.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/kernels/attention.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {

using kernels::AttentionShape;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Elements of a [batch, heads, len, width] tensor.
inline std::int64_t numel(const AttentionShape& s, std::int64_t len, std::int64_t width = 1) {
  return s.batch * s.heads * len * width;
}

inline std::string describe(const AttentionShape& s, bool causal) {
  std::ostringstream out;
  out << "batch " << s.batch << " heads " << s.heads << " q_len " << s.q_len << " kv_len "
      << s.kv_len << " head_dim " << s.head_dim << (causal ? " causal" : " non-causal");
  return out.str();
}

template <class T>
struct Inputs {
  Inputs(const AttentionShape& s, std::uint64_t key)
      : q(random_values<T>(numel(s, s.q_len, s.head_dim), key)),
        k(random_values<T>(numel(s, s.kv_len, s.head_dim), key + 1)),
        v(random_values<T>(numel(s, s.kv_len, s.head_dim), key + 2)),
        dout(random_values<T>(numel(s, s.q_len, s.head_dim), key + 3)) {}
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
inline const Case kCases[] = {
    {{1, 1, 1, 1, 1}, true},   {{2, 3, 7, 7, 5}, true},  {{1, 2, 13, 13, 1}, true},
    {{2, 1, 16, 16, 8}, true}, {{1, 1, 0, 0, 4}, true},  {{0, 2, 3, 3, 2}, true},
    {{1, 1, 5, 5, 0}, true},   {{2, 3, 7, 7, 5}, false}, {{2, 3, 5, 9, 4}, false},
    {{1, 2, 13, 7, 3}, false}, {{1, 1, 1, 1, 1}, false}, {{1, 1, 4, 0, 3}, false}};

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

}  // namespace dtw::kernel_test
