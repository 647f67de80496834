// Step 05.3: the executor. The naive, GPipe and 1F1B pipelines reproduce the
// single-device reference in double for every (p, m) of the grid, on the GPT
// (tied head: the embedding lives on both ends) and the MLP; the activation
// memory the ledger measured is exactly what the schedule says; bad input is
// a clear error on every rank, before any message.
#include <gtest/gtest.h>

#include <algorithm>

#include "dtw/model/params.h"
#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::error_of;
using testing::expect_matches;
using testing::kGrid;
using testing::knobs;
using testing::on;
using testing::tiny;

DTW_TEST_STEPS(ExecutorTest, "05.3");
TEST(ExecutorTest, RunsTheNaiveScheduleOnHandBuiltStages) {
  // gpt-tiny's 2 blocks on 1 and 2 ranks (the tied embedding on both ends),
  // mlp-tiny's 3 layers on 1 and 3, with 1 and 3 micro-batches of 8 rows.
  for (const auto& [model, p] : std::vector<std::pair<const char*, int>>{
           {"gpt-tiny", 1}, {"gpt-tiny", 2}, {"mlp-tiny", 1}, {"mlp-tiny", 3}})
    for (int m : {1, 3}) {
      DTW_TRACE("hand-built naive stages, " << ::dtw::testing::describe_run(tiny(model), p, testing::knobs(m)));
      const train::RunOutcome out = testing::run_hand_built(tiny(model), p, m, {});
      EXPECT_TRUE(out.matches) << model << ", p = " << p << ", m = " << m << ": " << out.mismatch;
      for (const train::RankOutcome& r : out.ranks)
        EXPECT_EQ(r.losses.size(), 3u) << model << ", p = " << p << ": every rank knows the loss";
    }
}

TEST(ExecutorTest, EveryBufferASendReadsOutlivesTheSend) {
  // The given part of the executor checks the rule on every pass that goes
  // back to the pool or comes out of it, and before every backward: memory a
  // posted send still reads (not waited for yet) is neither reused nor
  // freed. A break is an InvalidArgument naming the rank, the action and the
  // rule, on every run, not a numeric drift on some. Every micro-batch in
  // flight at once (GPipe's order, written here) and the naive list.
  for (const auto& [model, p] : std::vector<std::pair<const char*, int>>{{"gpt-tiny", 2}, {"mlp-tiny", 3}})
    for (const bool all : {false, true}) {
      const int m = 3;
      DTW_TRACE("hand-built " << (all ? "every micro-batch in flight (GPipe's order)" : "naive")
                              << " stages, " << ::dtw::testing::describe_run(tiny(model), p, knobs(m))
                              << ": the buffers that sends read");
      const Schedule s = all ? testing::all_in_flight(p, m) : naive_schedule(p, m);
      try {
        const train::RunOutcome out = testing::run_hand_built(tiny(model), p, m, {}, &s);
        EXPECT_TRUE(out.matches) << out.mismatch;
      } catch (const InvalidArgument& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

DTW_TEST_STEPS(PipelineTest, "05.1", "05.2", "05.3", "05.6");
TEST(PipelineTest, NaiveGPipeAndOneFOneBMatchTheReference) {
  for (ScheduleKind kind : {ScheduleKind::kNaive, ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (const auto& [p, m] : kGrid)
      for (const char* model : {"gpt-tiny", "mlp-tiny"}) expect_matches(kind, model, p, m);
}

TEST(PipelineTest, EveryBalanceMatchesTheReference) {
  for (const char* balance : {"params", "time", "blocks"})
    expect_matches(ScheduleKind::kOneFOneB, "gpt-tiny", 2, 3, {std::string("balance=") + balance});
}

TEST(PipelineTest, TheDefaultsRunAsDtwTrainDoes) {
  // No knobs: m = 2p (at most the batch), balance by counted FLOPs.
  const train::RunSpec spec = tiny("gpt-tiny");
  const train::RunOutcome out = train::run_ranks<double>(spec, on(3), pp_1f1b<double>);
  EXPECT_TRUE(out.matches) << out.mismatch;
  const PipelineSettings s = pipeline_settings({}, ScheduleKind::kOneFOneB, spec, 3);
  EXPECT_EQ(s.micro_batches, 6);
  EXPECT_EQ(pipeline_settings({}, ScheduleKind::kNaive, spec, 3).micro_batches, 1);
}

TEST(PipelineTest, StagesSendOnlyToTheirNeighbours) {
  // gpt-tiny on 4 stages: activations r → r+1, gradients r+1 → r, and the
  // tied embedding between the two ends; nothing else.
  const train::RunSpec spec = tiny("gpt-tiny", 1, 1);
  const train::RunOutcome out = train::run_ranks<double>(spec, on(4, knobs(4)), pp_gpipe<double>);
  ASSERT_TRUE(out.matches) << out.mismatch;
  const std::int64_t boundary = spec.batch * spec.sequence() * spec.config().dim * 8;  // bytes per step
  const std::int64_t wte = spec.config().vocab * spec.config().dim * 8;
  // The two-number allreduce of the clipping norm and the loss goes around
  // the ring r → r+1 (and 3 → 0): a few dozen bytes on top.
  auto near = [](std::int64_t got, std::int64_t want) { return got >= want && got < want + 64; };
  for (int r = 0; r < 4; ++r) {
    for (int to = 0; to < 4; ++to) {
      std::int64_t want = 0;
      if (to == r + 1) want = boundary;                 // activations down
      if (to == r - 1) want = boundary;                 // gradients up
      if (r == 3 && to == 0) want = wte;                // the head's share of dwte
      if (r == 0 && to == 3) want = wte;                // the stepped wte, back
      const bool ring = to == (r + 1) % 4;
      const std::int64_t got = out.report.traffic.bytes(r, to);
      if (ring) EXPECT_TRUE(near(got, want)) << r << " -> " << to << ": " << got << " bytes, want " << want;
      else EXPECT_EQ(got, want) << r << " -> " << to;
    }
  }
}

TEST(PipelineTest, TheTraceShowsAtMostPMinusSMicroBatchesInFlightUnderOneFOneB) {
  // Counted from the executor's own timeline events (stage and micro-batch
  // of every forward and backward), not from the schedule's arithmetic.
  const int p = 4, m = 8;
  for (ScheduleKind kind : {ScheduleKind::kOneFOneB, ScheduleKind::kGPipe}) {
    train::HarnessOptions o = on(p, knobs(m));
    o.trace = true;
    const train::RunOutcome out =
        train::run_ranks<double>(tiny("gpt-tiny", 1, 1), o, testing::strategy_of(kind));
    ASSERT_TRUE(out.matches) << out.mismatch;
    for (int r = 0; r < p; ++r) {
      std::vector<const TraceEvent*> mine;
      for (const TraceEvent& e : out.report.trace)
        if (e.rank == r && e.category == "compute" && e.stage >= 0) mine.push_back(&e);
      std::sort(mine.begin(), mine.end(),
                [](const TraceEvent* a, const TraceEvent* b) { return a->start_us < b->start_us; });
      int now = 0, most = 0, forwards = 0;
      for (const TraceEvent* e : mine) {
        EXPECT_EQ(e->stage, r) << "rank " << r << " ran stage " << e->stage;
        if (e->name == "forward") most = std::max(most, ++now), ++forwards;
        if (e->name == "backward") --now;
      }
      EXPECT_EQ(forwards, m) << "rank " << r;
      EXPECT_EQ(now, 0) << "rank " << r << ": every forward has its backward";
      EXPECT_EQ(most, kind == ScheduleKind::kGPipe ? m : p - r) << name_of(kind) << ", rank " << r;
    }
  }
}

DTW_TEST_STEPS(PipelineMemoryTest, "05.1", "05.2", "05.3", "05.6");
TEST(PipelineMemoryTest, GPipeHoldsEveryMicroBatchAndOneFOneBAtMostPMinusS) {
  // A fixed micro-batch of one sequence, so the batch grows with m (as it
  // does in practice: the micro-batch is what fits, m is how many).
  const int p = 4;
  std::int64_t gpipe_first = 0, one_f_first = 0;
  for (int m : {4, 8, 16}) {
    train::RunSpec spec = tiny("gpt-tiny", 1, 1);
    spec.batch = m;
    const StageMap map = make_stage_map(spec, Balance::kParams, p, 1, m, nullptr);
    for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
      const train::RunOutcome out =
          train::run_ranks<double>(spec, on(p, knobs(m)), testing::strategy_of(kind));
      ASSERT_TRUE(out.matches) << out.mismatch;
      const Schedule s = make_schedule(kind, p, m);
      for (int r = 0; r < p; ++r) {
        const std::int64_t measured = out.report.memory[r].peak_of(MemoryCategory::kActivations);
        EXPECT_EQ(measured, activation_peak<double>(s, map, spec, r, false))
            << name_of(kind) << ", m = " << m << ", rank " << r;
      }
      const std::int64_t first = out.report.memory[0].peak_of(MemoryCategory::kActivations);
      std::int64_t& base = kind == ScheduleKind::kGPipe ? gpipe_first : one_f_first;
      if (m == 4) base = first;
      if (kind == ScheduleKind::kGPipe) EXPECT_EQ(first, base * m / 4) << "GPipe grows with m";
      else EXPECT_EQ(first, base) << "1F1B does not grow with m";
    }
  }
}

double formula(ScheduleKind kind, double p, double m) {
  return kind == ScheduleKind::kNaive ? (p - 1) / p : (p - 1) / (m + p - 1);
}

DTW_TEST_STEPS(PipelineBubbleTest, "05.1", "05.2", "05.3", "05.6");
TEST(PipelineBubbleTest, OnEqualStagesTheBubbleIsTheFormula) {
  // From real runs replayed with free messages: the executor adds no wait
  // the schedule does not have.
  for (ScheduleKind kind : {ScheduleKind::kNaive, ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (int p : {2, 4, 8})
      for (int m : {1, 4, 8, 32})
        EXPECT_NEAR(testing::ideal_bubble(kind, p, m), formula(kind, p, m), 0.01)
            << name_of(kind) << ", p = " << p << ", m = " << m;
}

TEST(PipelineBubbleTest, TheSeedsTwentyFiveAndFiftySevenPercent) {
  // Four GPUs, one batch: a quarter of the time busy; four micro-batches: 4/7.
  EXPECT_NEAR(1 - testing::ideal_bubble(ScheduleKind::kNaive, 4, 1), 0.25, 0.01);
  EXPECT_NEAR(1 - testing::ideal_bubble(ScheduleKind::kGPipe, 4, 4), 4.0 / 7, 0.01);
}

DTW_TEST_STEPS(PipelineArgumentsTest, "05.2");
TEST(PipelineArgumentsTest, BadSettingsAreClearErrorsOnEveryRank) {
  const train::RunSpec gpt = tiny("gpt-tiny");
  auto run = [](const train::RunSpec& spec, int p, train::Knobs k, ScheduleKind kind) {
    return error_of<InvalidArgument>(
        [&] { train::run_ranks<double>(spec, on(p, k), testing::strategy_of(kind)); });
  };
  EXPECT_NE(run(gpt, 2, knobs(0), ScheduleKind::kGPipe).find("micro_batches=0 must be in [1, 100000)"),
            std::string::npos);
  EXPECT_NE(run(gpt, 2, knobs(9), ScheduleKind::kGPipe)
                .find("micro_batches=9 needs a batch of at least 9 rows; the batch has 8"),
            std::string::npos);
  EXPECT_NE(run(tiny("mlp-tiny"), 4, knobs(4), ScheduleKind::kOneFOneB)
                .find("4 ranks × 1 chunk(s) each need 4 units, but mlp-tiny has 3"),
            std::string::npos);
  EXPECT_NE(run(gpt, 2, knobs(2, {"virtual_stages=2"}), ScheduleKind::kGPipe)
                .find("virtual_stages=2 is for pp-interleaved"),
            std::string::npos);
  EXPECT_NE(run(gpt, 2, knobs(2, {"sends=eager"}), ScheduleKind::kGPipe).find("sends=eager"),
            std::string::npos);
  EXPECT_NE(run(gpt, 2, knobs(2, {"checkpoint=2"}), ScheduleKind::kGPipe).find("checkpoint=2"),
            std::string::npos);
}

DTW_TEST_STEPS(ExecutorArgumentsTest, "05.1", "05.2", "05.3");
TEST(ExecutorArgumentsTest, AnActionForAnotherRanksChunkIsAClearError) {
  // Unchecked, a list that runs chunk 0 on rank 1 is stopped by the executor.
  Schedule s = gpipe_schedule(2, 2);
  s.actions[1].insert(s.actions[1].begin(), Action{Op::kForward, 0, 0});
  PipelineSettings settings = pipeline_settings(knobs(2), ScheduleKind::kGPipe, tiny("gpt-tiny"), 2);
  settings.check = false;
  const std::string e = error_of<InvalidArgument>([&] {
    train::run_ranks<double>(tiny("gpt-tiny"), on(2), [&](train::RankRun<double>& run) {
      train_pipeline(run, s, settings);
    });
  });
  EXPECT_NE(e.find("rank 1: action 0 (F0) is for chunk 0, which runs on rank 0"), std::string::npos) << e;
}

TEST(ExecutorArgumentsTest, ASendBeforeItsForwardOrBackwardIsAClearError) {
  // Unchecked, a list that sends what it has not made yet is stopped by the
  // executor, naming the rank and the action.
  PipelineSettings settings = pipeline_settings(knobs(2), ScheduleKind::kGPipe, tiny("gpt-tiny"), 2);
  settings.check = false;
  auto run = [&](const Schedule& s) {
    return error_of<InvalidArgument>([&] {
      train::run_ranks<double>(tiny("gpt-tiny"), on(2), [&](train::RankRun<double>& r) {
        train_pipeline(r, s, settings);
      });
    });
  };
  {
    DTW_TRACE("gpipe p = 2, m = 2, rank 0 sends activation 0 before F0");
    Schedule s = gpipe_schedule(2, 2);
    std::swap(s.actions[0][0], s.actions[0][1]);  // F0, send act 0 -> send act 0, F0
    const std::string e = run(s);
    EXPECT_NE(e.find("rank 0: send act 0 before its forward F0"), std::string::npos) << e;
  }
  {
    DTW_TRACE("gpipe p = 2, m = 2, rank 1 sends gradient 1 before B1@c1");
    Schedule s = gpipe_schedule(2, 2);
    auto& list = s.actions[1];
    const auto b = std::find(list.begin(), list.end(), Action{Op::kBackward, 1, 1});
    ASSERT_NE(b, list.end());
    std::iter_swap(b, b + 1);  // B1@c1, send grad 1@c1 -> send grad 1@c1, B1@c1
    const std::string e = run(s);
    EXPECT_NE(e.find("rank 1: send grad 1@c1 before its backward B1@c1"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace dtw::ch05
