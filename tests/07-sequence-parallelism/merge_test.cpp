// Step 07.3, the merge: partial results over disjoint key blocks, merged
// with their log-sum-exp in any order, equal the softmax over all the keys;
// a side that saw no key (lse −∞) changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

// "" when got equals want within tol (relative to max(1, |want|)); otherwise
// the first difference, by tensor and query row: "out[row 2, feature 1]:
// expected 0.25, got 0.5".
std::string merged_difference(const char* tensor, const std::vector<double>& want,
                              const std::vector<double>& got, std::int64_t d, double tol = 0) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d_i = std::abs(want[i] - got[i]);
    const bool same = want[i] == got[i] || d_i <= tol * std::max(1.0, std::abs(want[i]));
    if (same) continue;
    std::ostringstream o;
    o << tensor << "[row " << static_cast<std::int64_t>(i) / d;
    if (d > 1) o << ", feature " << static_cast<std::int64_t>(i) % d;
    o << "]: expected " << want[i] << ", got " << got[i];
    return o.str();
  }
  return {};
}

DTW_TEST_STEPS(MergeTest, "07.3");
TEST(MergeTest, BlocksMergedInAnyOrderEqualTheWholeSoftmax) {
  // One sequence, one head, 12 keys in 4 blocks of 3; queries see every key.
  const std::int64_t T = 12, D = 3, Q = 5;
  const auto q = testing::random_values(Q * D, 11, 2.0), k = testing::random_values(T * D, 12, 2.0),
             v = testing::random_values(T * D, 13);
  std::vector<double> want(Q * D), want_lse(Q);
  kernels::attention_block_forward(want.data(), want_lse.data(), q.data(), k.data(), v.data(),
                                   {1, 1, Q, T, D}, 0, 0, false);
  std::vector<int> order = {0, 1, 2, 3};
  do {
    DTW_TRACE("merge of 4 key blocks in the order " << order[0] << order[1] << order[2]
                                                    << order[3]);
    std::vector<double> out(Q * D, 0.0), lse(Q, -std::numeric_limits<double>::infinity());
    std::vector<double> part(Q * D), part_lse(Q);
    for (int b : order) {
      kernels::attention_block_forward(part.data(), part_lse.data(), q.data(), k.data() + b * 3 * D,
                                       v.data() + b * 3 * D, {1, 1, Q, 3, D}, 0, 0, false);
      merge_partial(out.data(), lse.data(), part.data(), part_lse.data(), Q, D);
    }
    std::string bad = merged_difference("lse", want_lse, lse, 1, 1e-13);
    if (bad.empty()) {
      bad = merged_difference("out", want, out, D, 1e-13);
      if (!bad.empty())
        bad += " (lse is right, out is not: weigh each side's output by e^(lse_side − lse), "
               "lse the merged log-sum-exp)";
    }
    if (!bad.empty())
      ADD_FAILURE() << bad << " (the merged result must equal the softmax over all 12 keys, in "
                    << "any order of the blocks)";
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(MergeTest, ASideThatSawNoKeyChangesNothing) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  DTW_TRACE("merge with -inf log-sum-exps");
  std::vector<double> out = {0, 0, 1, 2}, lse = {-kInf, 0.5};
  const std::vector<double> part = {3, 4, 9, 9}, part_lse = {0.25, -kInf};
  merge_partial(out.data(), lse.data(), part.data(), part_lse.data(), 2, 2);
  std::string bad = merged_difference("lse", {0.25, 0.5}, lse, 1);
  if (bad.empty()) bad = merged_difference("out", {3, 4, 1, 2}, out, 2);
  if (!bad.empty())
    ADD_FAILURE() << bad << " (a side with lse −∞ saw no key: the merge is the other side, exactly)";
  std::vector<double> none = {0, 0}, none_lse = {-kInf};
  merge_partial(none.data(), none_lse.data(), none.data(), none_lse.data(), 1, 2);
  bad = merged_difference("lse", {-kInf}, none_lse, 1);
  if (bad.empty()) bad = merged_difference("out", {0, 0}, none, 2);
  if (!bad.empty()) ADD_FAILURE() << bad << " (both sides −∞: the row stays at out 0, lse −∞)";
}

TEST(MergeTest, LargeScoresDoNotOverflow) {
  DTW_TRACE("merge of log-sum-exps near 1000");
  std::vector<double> out = {1.0}, lse = {1000.0};
  const std::vector<double> part = {3.0}, part_lse = {1000.0};
  merge_partial(out.data(), lse.data(), part.data(), part_lse.data(), 1, 1);
  const std::string bad = merged_difference("lse", {1000.0 + std::log(2.0)}, lse, 1, 1e-12) +
                          merged_difference("out", {2.0}, out, 1, 1e-12);
  if (!bad.empty())
    ADD_FAILURE() << bad << " (subtract the larger lse before exponentiating, or e^1000 overflows)";
}

}  // namespace
}  // namespace dtw::ch07
