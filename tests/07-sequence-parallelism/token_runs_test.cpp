// Steps 07.1 and 07.4: who holds which tokens. The runs equal the model's
// own shard positions for every split and world; the zig-zag chunks pair an
// early chunk with its mirror; bad sizes are clear errors naming the values.
#include <gtest/gtest.h>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::expect_error;

// The same positions in the same local order (the model merges adjacent runs).
void expect_same_runs(const TokenRuns& want, const TokenRuns& got) {
  ASSERT_EQ(want.size(), got.size());
  for (std::int64_t t = 0; t < want.size(); ++t)
    ASSERT_EQ(want.position(t), got.position(t)) << "local token " << t;
}

DTW_TEST_STEPS(SequenceRunsTest, "07.1");
TEST(SequenceRunsTest, ContiguousRunsAreTheModelsShards) {
  for (int p : {1, 2, 3, 4, 8})
    for (int r = 0; r < p; ++r) {
      DTW_TRACE("contiguous runs, p " << p << ", rank " << r << ", T 48");
      expect_same_runs(model::ModelShard::sequence(r, p, SequenceSplit::kContiguous).positions(48),
                       sequence_runs(r, p, SequenceSplit::kContiguous, 48));
    }
  const TokenRuns last = sequence_runs(3, 4, SequenceSplit::kContiguous, 32);
  ASSERT_EQ(last.runs.size(), 1u);
  EXPECT_EQ(last.runs[0].begin, 24);
  EXPECT_EQ(last.runs[0].end, 32);
}

DTW_TEST_STEPS(ZigZagRunsTest, "07.4");
TEST(ZigZagRunsTest, RankRHoldsChunksRAndTwoPMinusOneMinusR) {
  for (int p : {1, 2, 3, 4, 8})
    for (int r = 0; r < p; ++r) {
      DTW_TRACE("zig-zag runs, p " << p << ", rank " << r << ", T 48");
      expect_same_runs(model::ModelShard::sequence(r, p, SequenceSplit::kZigZag).positions(48),
                       sequence_runs(r, p, SequenceSplit::kZigZag, 48));
    }
  const TokenRuns r1 = sequence_runs(1, 4, SequenceSplit::kZigZag, 32);  // chunks of 4
  ASSERT_EQ(r1.runs.size(), 2u);
  EXPECT_EQ(r1.runs[0].begin, 4);
  EXPECT_EQ(r1.runs[1].begin, 24);
  EXPECT_EQ(r1.runs[1].end, 28);
}

DTW_TEST_STEPS(CausalWorkTest, "07.1", "07.4");
TEST(CausalWorkTest, TheClosedFormCountsEveryVisiblePair) {
  for (auto split : {SequenceSplit::kContiguous, SequenceSplit::kZigZag})
    for (int p : {1, 2, 3, 4, 8})
      for (int r = 0; r < p; ++r) {
        DTW_TRACE("causal work table, p " << p << ", rank " << r << ", T 48"
                                          << (split == SequenceSplit::kZigZag ? ", zig-zag" : ""));
        const TokenRuns mine = sequence_runs(r, p, split, 48);
        const TokenRuns all{{{0, 48}}};
        EXPECT_EQ(causal_work(r, p, split, 48), visible_pairs(mine, all, true))
            << "causal_work against the pairs counted one by one: each query at position i "
            << "sees the i + 1 keys j <= i";
      }
}

TEST(CausalWorkTest, ZigZagIsBalancedAndContiguousIsNot) {
  const std::int64_t T = 64;
  for (int p : {2, 4, 8}) {
    DTW_TRACE("causal work table, p " << p << ", T " << T);
    const std::int64_t C = T / p;
    // Contiguous: the last rank does ((2p−1)C + 1)/(C + 1) times the first's work.
    const std::int64_t first = causal_work(0, p, SequenceSplit::kContiguous, T);
    const std::int64_t last = causal_work(p - 1, p, SequenceSplit::kContiguous, T);
    EXPECT_EQ(last * (C + 1), first * ((2 * p - 1) * C + 1))
        << "contiguous: rank p−1's work " << last << " should be ((2p−1)C + 1)/(C + 1) times "
        << "rank 0's " << first << " (C = T/p = " << C << ")";
    for (int r = 1; r < p; ++r)
      EXPECT_EQ(causal_work(r, p, SequenceSplit::kZigZag, T),
                causal_work(0, p, SequenceSplit::kZigZag, T))
          << "zig-zag: rank " << r << "'s work should equal rank 0's: every rank pairs an early "
          << "chunk with its late mirror, and the two add up the same";
  }
}

DTW_TEST_STEPS(RunsArgumentsTest);  // refused before any lab code runs
TEST(RunsArgumentsTest, ASequenceThatDoesNotCutIsAClearError) {
  expect_error([] { sequence_runs(1, 3, SequenceSplit::kContiguous, 32); },
               {"rank 1", "32 tokens", "3"});
  expect_error([] { sequence_runs(4, 4, SequenceSplit::kContiguous, 32); }, {"rank 4", "4 ranks"});
}

TEST(RunsArgumentsTest, ASequenceNotDivisibleByTwoPIsAClearError) {
  // 36 tokens cut into 4 contiguous parts, but not into 8 zig-zag chunks.
  expect_error([] { sequence_runs(2, 4, SequenceSplit::kZigZag, 36); },
               {"rank 2", "36 tokens", "8 zig-zag chunks"});
}

}  // namespace
}  // namespace dtw::ch07
