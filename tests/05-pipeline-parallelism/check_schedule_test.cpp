// Step 05.6: checking a schedule before it runs, and the pitfalls from the
// field: every generated schedule passes; hand-written ones that cannot
// complete are clear errors naming rank, chunk, micro-batch and direction;
// unchecked, the deadlock detector catches them with a wait-for graph whose
// tags are spelled out; blocking sends deadlock 1F1B (pytorch#172668) and
// criss-cross on the interleaved schedule (pytorch#127332); a warm-up
// without the clamp is stopped before any message (pytorch/torchtitan#775).
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::error_of;
using testing::knobs;
using testing::on;
using testing::tiny;

DTW_TEST_STEPS(CheckScheduleTest, "05.2", "05.4", "05.6");
TEST(CheckScheduleTest, AcceptsEveryGeneratedSchedule) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 10; ++m) {
      DTW_TRACE("check_schedule of every generated schedule, p = " << p << ", m = " << m);
      for (ScheduleKind kind : {ScheduleKind::kNaive, ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
        check_schedule(make_schedule(kind, p, m));
      for (int v = 1; v <= 3; ++v) check_schedule(interleaved_schedule(p, m, v));
    }
}

// p = 2: rank 0 waits for micro-batch 0's gradient before it has sent the
// activation rank 1 needs to compute it.
Schedule crossed() {
  Schedule s = naive_schedule(2, 1);
  s.actions[0] = {{Op::kForward, 0, 0},
                  {Op::kRecv, 0, 0, Dir::kGradient},
                  {Op::kBackward, 0, 0},
                  {Op::kSend, 0, 0, Dir::kActivation}};
  return s;
}

TEST(CheckScheduleTest, AnOrderThatCannotCompleteNamesWhoWaitsForWhat) {
  DTW_TRACE("check_schedule of a crossed naive order: p = 2, m = 1, rank 0 waits for the gradient first");
  const std::string e = error_of<InvalidArgument>([] { check_schedule(crossed()); });
  EXPECT_NE(e.find("naive schedule (p = 2, m = 1, v = 1) cannot complete"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 waits in action 1 (recv grad 0) for the gradient of micro-batch 0 from "
                   "chunk 1 (rank 1) to chunk 0 (rank 0)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("rank 1 waits in action 0 (recv act 0@c1) for the activation of micro-batch 0 "
                   "from chunk 0 (rank 0) to chunk 1 (rank 1)"),
            std::string::npos)
      << e;
}

TEST(CheckScheduleTest, ListsThatAreWrongOnTheirOwnAreClearErrors) {
  DTW_TRACE("check_schedule of hand-broken GPipe lists, p = 2, m = 2");
  auto error = [](Schedule s) { return error_of<InvalidArgument>([&] { check_schedule(s); }); };
  Schedule a = gpipe_schedule(2, 2);
  a.actions[1].erase(a.actions[1].begin());  // drop "recv act 0@c1"
  EXPECT_NE(error(a).find("rank 1, action 0 (F0@c1): forwards before receiving its input"), std::string::npos)
      << error(a);
  Schedule b = gpipe_schedule(2, 2);
  b.actions[0].pop_back();  // drop rank 0's last backward
  EXPECT_NE(error(b).find("rank 0 never backwards micro-batch 0 of chunk 0"), std::string::npos) << error(b);
  Schedule c = gpipe_schedule(2, 2);
  c.actions[0].push_back({Op::kForward, 1, 0});
  EXPECT_NE(error(c).find("chunk 1 is not one of rank 0's"), std::string::npos) << error(c);
  Schedule d = gpipe_schedule(2, 2);
  d.actions[1].push_back({Op::kSend, 1, 0, Dir::kActivation});
  EXPECT_NE(error(d).find("the last chunk has no next chunk"), std::string::npos) << error(d);
  Schedule f = gpipe_schedule(2, 2);
  f.actions[0].push_back({Op::kBackward, 0, 1});
  EXPECT_NE(error(f).find("repeats action"), std::string::npos) << error(f);
}

TEST(CheckScheduleTest, ABackwardBeforeItsOutputsGradientArrivesIsRefused) {
  // Rank 0 of GPipe (p = 2, m = 2) backwards micro-batch 1 and only then
  // receives its gradient: every message still pairs and the dry run still
  // finishes, but the backward would run from a gradient it does not have.
  DTW_TRACE("check_schedule of a backward before its output's gradient arrives, gpipe p = 2, m = 2");
  Schedule s = gpipe_schedule(2, 2);
  auto& list = s.actions[0];
  const auto recv = std::find(list.begin(), list.end(), Action{Op::kRecv, 0, 1, Dir::kGradient});
  ASSERT_NE(recv, list.end()) << s.describe();
  ASSERT_EQ(*(recv + 1), (Action{Op::kBackward, 0, 1})) << s.describe();
  std::iter_swap(recv, recv + 1);
  const std::string e = error_of<InvalidArgument>([&] { check_schedule(s); });
  EXPECT_NE(e.find("rank 0, action 4 (B1): backwards before receiving its output's gradient"),
            std::string::npos)
      << e;
}

DTW_TEST_STEPS(UncheckedScheduleTest, "05.1", "05.3");
TEST(UncheckedScheduleTest, UncheckedTheDeadlockDetectorNamesStageMicroBatchAndDirection) {
  // The same crossed list, run with check=0: the detector reports the cycle
  // and the executor spells out the tags of the messages each rank waits for.
  PipelineSettings s = pipeline_settings(knobs(1), ScheduleKind::kNaive, tiny("gpt-tiny"), 2);
  s.check = false;
  const std::string e = error_of<DeadlockError>([&] {
    train::run_ranks<double>(tiny("gpt-tiny"), on(2),
                             [&](train::RankRun<double>& run) { train_pipeline(run, crossed(), s); });
  });
  EXPECT_NE(e.find("cycle: rank 0 -> rank 1 -> rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("tag 200100000 = gradient of micro-batch 0 from chunk 1 to chunk 0"), std::string::npos) << e;
  EXPECT_NE(e.find("tag 100000000 = activation of micro-batch 0 from chunk 0 to chunk 1"), std::string::npos) << e;
}

DTW_TEST_STEPS(PitfallTest, "05.1", "05.2", "05.3", "05.4", "05.6");
TEST(PitfallTest, BlockingSendsDeadlockOneFOneBWhenBothNeighboursSendFirst) {
  // pytorch#172668: stage 0 sends micro-batch 1's activation down while
  // stage 1 sends micro-batch 0's gradient up; neither receives.
  const std::string e = error_of<DeadlockError>([] {
    train::run_ranks<double>(tiny("gpt-tiny"), on(2, knobs(4, {"sends=blocking"})), pp_1f1b<double>);
  });
  EXPECT_NE(e.find("cycle: rank 0 -> rank 1 -> rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("activation of micro-batch 1 from chunk 0 to chunk 1"), std::string::npos) << e;
  EXPECT_NE(e.find("gradient of micro-batch 0 from chunk 1 to chunk 0"), std::string::npos) << e;
  // GPipe's lists never have both neighbours sending at once: blocking sends
  // only cost it time.
  const train::RunOutcome out = train::run_ranks<double>(
      tiny("gpt-tiny"), on(2, knobs(4, {"sends=blocking"})), pp_gpipe<double>);
  EXPECT_TRUE(out.matches) << out.mismatch;
}

TEST(PitfallTest, BlockingSendsDeadlockTheInterleavedWrapAround) {
  // pytorch#127332: rank 1's last chunk sends to rank 0's next chunk while
  // rank 0 sends to rank 1: both activations, in opposite directions.
  const std::string e = error_of<DeadlockError>([] {
    train::run_ranks<double>(tiny("gpt-tiny"), on(2, knobs(4, {"sends=blocking", "virtual_stages=2"})),
                             pp_interleaved<double>);
  });
  EXPECT_NE(e.find("activation of micro-batch 1 from chunk 0 to chunk 1"), std::string::npos) << e;
  EXPECT_NE(e.find("activation of micro-batch 0 from chunk 1 to chunk 2"), std::string::npos) << e;
}

TEST(PitfallTest, AWarmUpWithoutTheClampIsStoppedBeforeAnyMessage) {
  // pytorch/torchtitan#775: a warm-up of p − s − 1 forwards whatever m is,
  // right for m >= p, so the bug hides until m < p. Here the lists of 1F1B
  // for m = p = 4 stand for it, run as a step of m = 1: stage 0 then forwards
  // micro-batches 1, 2 and 3, which the step does not have (`dtw run
  // pp-fewer-micro-batches` runs the broken generator itself).
  DTW_TRACE("1f1b lists written for m = 4, run with m = 1 on 4 stages");
  auto unclamped = [] {
    Schedule s = one_f_one_b_schedule(4, 4);
    s.micro_batches = 1;
    return s;
  };
  const std::string e = error_of<InvalidArgument>([&] { check_schedule(unclamped()); });
  EXPECT_NE(e.find("rank 0, action 2 (F1): names micro-batch 1, but the step has m = 1 micro-batches"),
            std::string::npos)
      << e;
  PipelineSettings s = pipeline_settings(knobs(1), ScheduleKind::kOneFOneB, tiny("gpt-tiny"), 4);
  const std::string run = error_of<InvalidArgument>([&] {
    train::run_ranks<double>(tiny("gpt-tiny"), on(4), [&](train::RankRun<double>& r) {
      train_pipeline(r, unclamped(), s);
    });
  });
  EXPECT_NE(run.find("but the step has m = 1 micro-batches"), std::string::npos) << run;
}

}  // namespace
}  // namespace dtw::ch05
