// Step 05.2: the schedule generators. Their lists are checked here as data,
// by an oracle of this test (pipeline_test_util.h), not by the lab's own
// check_schedule: every micro-batch's forward precedes its backward on each
// stage, every send pairs with exactly one receive, a dry run finishes, and
// the shapes are GPipe's and 1F1B's.
#include <gtest/gtest.h>

#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::max_in_flight;
using testing::oracle;

// The compute actions of rank r, as "F0 F1 B1 B0".
std::string compute_of(const Schedule& s, int r) {
  std::string out;
  for (const Action& a : s.actions[static_cast<std::size_t>(r)])
    if (a.op == Op::kForward || a.op == Op::kBackward) {
      if (!out.empty()) out += ' ';
      out += to_string(a);
    }
  return out;
}

DTW_TEST_STEPS(ScheduleTest, "05.2");
TEST(ScheduleTest, EveryListPairsAndCompletes) {
  for (ScheduleKind kind : {ScheduleKind::kNaive, ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 12; ++m) {
        DTW_TRACE(name_of(kind) << ", p = " << p << ", m = " << m);
        const Schedule s = make_schedule(kind, p, m);
        ASSERT_EQ(s.actions.size(), static_cast<std::size_t>(p));
        EXPECT_EQ(oracle(s), "") << name_of(kind) << ", p = " << p << ", m = " << m << "\n"
                                 << s.describe();
      }
    }
  }
}

TEST(ScheduleTest, GPipeForwardsEverythingThenFlushes) {
  // The text's diagram: all forwards, then the backwards, the last forwarded first.
  DTW_TRACE("gpipe, p = 3, m = 4: forwards in order, then backwards in reverse order");
  const Schedule s = gpipe_schedule(3, 4);
  for (int r = 0; r < 3; ++r) {
    const std::string at = r == 0 ? std::string() : std::string("@c").append(std::to_string(r));
    std::string want;
    for (int mb = 0; mb < 4; ++mb) want.append(mb ? " F" : "F").append(std::to_string(mb)).append(at);
    for (int mb = 3; mb >= 0; --mb) want.append(" B").append(std::to_string(mb)).append(at);
    EXPECT_EQ(compute_of(s, r), want) << "rank " << r;
    EXPECT_EQ(max_in_flight(s, r), 4) << "GPipe holds every micro-batch at the flush";
  }
}

TEST(ScheduleTest, OneFOneBWarmsUpAlternatesAndCoolsDown) {
  const Schedule s = one_f_one_b_schedule(4, 6);
  EXPECT_EQ(compute_of(s, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(compute_of(s, 2), "F0@c2 F1@c2 B0@c2 F2@c2 B1@c2 F3@c2 B2@c2 F4@c2 B3@c2 F5@c2 B4@c2 B5@c2");
  EXPECT_EQ(compute_of(s, 3), "F0@c3 B0@c3 F1@c3 B1@c3 F2@c3 B2@c3 F3@c3 B3@c3 F4@c3 B4@c3 F5@c3 B5@c3");
  // Messages sit next to the compute that makes or needs them.
  EXPECT_EQ(s.actions[1][0], (Action{Op::kRecv, 1, 0, Dir::kActivation}));
  EXPECT_EQ(s.actions[1][1], (Action{Op::kForward, 1, 0}));
  EXPECT_EQ(s.actions[1][2], (Action{Op::kSend, 1, 0, Dir::kActivation}));
}

TEST(ScheduleTest, OneFOneBKeepsAtMostPMinusSMicroBatchesInFlight) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const Schedule s = one_f_one_b_schedule(p, m);
      const Schedule g = gpipe_schedule(p, m);
      const Schedule n = naive_schedule(p, m);
      for (int st = 0; st < p; ++st) {
        EXPECT_EQ(max_in_flight(s, st), std::min(p - st, m)) << "1f1b p " << p << " m " << m << " stage " << st;
        EXPECT_EQ(max_in_flight(g, st), m) << "gpipe p " << p << " m " << m << " stage " << st;
        EXPECT_EQ(max_in_flight(n, st), 1) << "naive p " << p << " m " << m << " stage " << st;
      }
    }
  }
}

TEST(ScheduleTest, FewerMicroBatchesThanStagesStillPair) {
  // The clamp min(p − s − 1, m): with m = 1 on 4 stages every stage runs F0, B0.
  DTW_TRACE("1f1b, p = 4, m = 1");
  const Schedule s = one_f_one_b_schedule(4, 1);
  for (int r = 0; r < 4; ++r) {
    const std::string at = r == 0 ? std::string() : std::string("@c").append(std::to_string(r));
    EXPECT_EQ(compute_of(s, r), std::string("F0").append(at).append(" B0").append(at));
  }
  EXPECT_EQ(oracle(s), "");
}

DTW_TEST_STEPS(ActionTest);
TEST(ActionTest, DescribeNamesEveryAction) {
  EXPECT_EQ(naive_schedule(2, 1).describe(),
            "rank 0: F0 send act 0 recv grad 0 B0\n"
            "rank 1: recv act 0@c1 F0@c1 B0@c1 send grad 0@c1\n");
  EXPECT_EQ(describe_pipe_tag(pipe_tag(Dir::kGradient, 3, 7)),
            "gradient of micro-batch 7 from chunk 3 to chunk 2");
  EXPECT_EQ(pipe_tag(Dir::kActivation, 2, 7), 100200007);
}

DTW_TEST_STEPS(ScheduleArgumentsTest);
TEST(ScheduleArgumentsTest, BadSizesAreClearErrors) {
  EXPECT_NE(testing::error_of<InvalidArgument>([] { make_schedule(ScheduleKind::kGPipe, 2, 0); })
                .find("m = 0"),
            std::string::npos);
  EXPECT_NE(testing::error_of<InvalidArgument>([] { make_schedule(ScheduleKind::kOneFOneB, 0, 4); })
                .find("p = 0"),
            std::string::npos);
  EXPECT_NE(testing::error_of<InvalidArgument>([] { make_schedule(ScheduleKind::kGPipe, 2, 4, 2); })
                .find("only the interleaved schedule"),
            std::string::npos);
}

}  // namespace
}  // namespace dtw::ch05
