// Step 05.4: interleaved 1F1B. The lists pair and finish for every (p, m, v)
// of a wide sweep (m not a multiple of p included), follow the documented
// order, and the strategy reproduces the reference with v = 2 on the grid.
#include <gtest/gtest.h>

#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::oracle;

DTW_TEST_STEPS(InterleavedTest, "05.4");
TEST(InterleavedTest, EveryListPairsAndCompletes) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 14; ++m)
      for (int v = 1; v <= 4; ++v) {
        DTW_TRACE("interleaved, p = " << p << ", m = " << m << ", v = " << v);
        const Schedule s = interleaved_schedule(p, m, v);
        EXPECT_EQ(oracle(s), "") << "p = " << p << ", m = " << m << ", v = " << v << "\n"
                                 << s.describe();
      }
}

TEST(InterleavedTest, GroupsOfPGoThroughTheRanksChunksInTurn) {
  const Schedule s = interleaved_schedule(2, 4, 2);
  std::string forwards, backwards;
  for (const Action& a : s.actions[0]) {
    if (a.op == Op::kForward) forwards += to_string(a) + " ";
    if (a.op == Op::kBackward) backwards += to_string(a) + " ";
  }
  EXPECT_EQ(forwards, "F0 F1 F0@c2 F1@c2 F2 F3 F2@c2 F3@c2 ");
  EXPECT_EQ(backwards, "B0@c2 B1@c2 B0 B1 B2@c2 B3@c2 B2 B3 ");
  // Rank 0 warms up with 2(p−1) + (v−1)·p = 4 forwards before its first backward.
  int before = 0;
  for (const Action& a : s.actions[0]) {
    if (a.op == Op::kBackward) break;
    before += a.op == Op::kForward ? 1 : 0;
  }
  EXPECT_EQ(before, 5);  // the warm-up, then the steady state's first forward
}

TEST(InterleavedTest, TheLastChunkWrapsAroundToTheFirstRank) {
  // p = 2, v = 2: chunk 1 (rank 1) sends its activation to chunk 2 (rank 0).
  const Schedule s = interleaved_schedule(2, 1, 2);
  bool wraps = false;
  for (const Action& a : s.actions[0])
    wraps = wraps || (a.op == Op::kRecv && a.dir == Dir::kActivation && a.chunk == 2);
  EXPECT_TRUE(wraps) << s.describe();
}

DTW_TEST_STEPS(InterleavedPipelineTest, "05.1", "05.3", "05.4", "05.6");
TEST(InterleavedPipelineTest, MatchesTheReferenceWithTwoChunksPerRank) {
  for (const auto& [p, m] : testing::kGrid)
    for (const char* model : {"gpt-tiny", "mlp-tiny"})
      testing::expect_matches(ScheduleKind::kInterleaved, model, p, m, {"virtual_stages=2"}, 2);
  testing::expect_matches(ScheduleKind::kInterleaved, "gpt-tiny", 2, 4, {"virtual_stages=4"}, 4);
}

TEST(InterleavedPipelineTest, TwoChunksPerRankDivideTheBubbleByTwo) {
  // (p−1)/(v·m + p − 1) for m ≥ p; for m < p a group of m micro-batches
  // leaves every rank idle p − m chunk-times per lap: (v(p−m) + m − 1)/(v·p + m − 1).
  const int v = 2;
  for (int p : {2, 4, 8})
    for (int m : {1, 4, 8, 32}) {
      const double want = m >= p ? (p - 1.0) / (v * m + p - 1) : (v * (p - m) + m - 1.0) / (v * p + m - 1);
      EXPECT_NEAR(testing::ideal_bubble(ScheduleKind::kInterleaved, p, m, v), want, 0.01)
          << "p = " << p << ", m = " << m;
    }
}

}  // namespace
}  // namespace dtw::ch05
