// Step 05.5: activation checkpointing. Every schedule still reproduces the
// reference; the activation peak the ledger measured is what the schedule
// says (saved inputs plus one chunk; first on hand-built stages, so a
// checkpointing mistake is named at 05.5), which cuts GPipe's peak by at least
// the chapter's ratio m·A / (m·I + A); and the price is one recompute per
// backward, counted in the trace.
#include <gtest/gtest.h>

#include "dtw/model/params.h"
#include "dtw/train/network.h"
#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::knobs;
using testing::on;
using testing::tiny;

DTW_TEST_STEPS(CheckpointTest, "05.3", "05.5");
TEST(CheckpointTest, RecomputingGivesTheSameTraining) {
  // On its own (the given naive schedule on hand-built stages), one rank
  // first, then gpt-tiny on 2 ranks and mlp-tiny on 3.
  for (const auto& [model, p] : std::vector<std::pair<const char*, int>>{
           {"gpt-tiny", 1}, {"gpt-tiny", 2}, {"mlp-tiny", 3}}) {
    DTW_TRACE("hand-built naive stages, "
              << ::dtw::testing::describe_run(tiny(model), p, testing::knobs(3)) << ", checkpointing");
    const train::RunOutcome out = testing::run_hand_built(tiny(model), p, 3, {.checkpoint = true});
    EXPECT_TRUE(out.matches) << model << ", p = " << p << ": " << out.mismatch;
  }
}

DTW_TEST_STEPS(CheckpointPeakTest, "05.5");
TEST(CheckpointPeakTest, ItIsTheSavedInputsPlusOneChunk) {
  // gpt-tiny cut by hand into [embed h.0] [h.1 head], two micro-batches of
  // 4 rows: without checkpointing the naive list holds one micro-batch's
  // activations and GPipe two; with it, the saved inputs plus one chunk.
  DTW_TRACE("activation_peak with checkpointing, gpt-tiny on 2 hand-cut stages, m = 2");
  const train::RunSpec spec = tiny("gpt-tiny");
  StageMap map;
  map.ranks = 2;
  map.chunks = {{0, 2}, {2, 4}};
  const std::int64_t input = train::Network<double>::make(spec.config())
                                 ->boundary_elements(2, train::make_batch(spec, 0, 0, 2)) *
                             static_cast<std::int64_t>(sizeof(double));
  // Both micro-batches in flight at once, written here (step 05.2 is not needed).
  Schedule both = naive_schedule(2, 2);
  both.actions.assign(2, {});
  for (int st = 0; st < 2; ++st) {
    both.forward(st, 0);
    both.forward(st, 1);
    both.backward(st, 1);
    both.backward(st, 0);
  }
  for (int r = 0; r < 2; ++r) {
    const std::int64_t held = activation_peak<double>(naive_schedule(2, 2), map, spec, r, false);
    EXPECT_EQ(activation_peak<double>(both, map, spec, r, false), 2 * held) << "rank " << r;
    const std::int64_t saved = r == 0 ? 0 : input;  // chunk 0's input is the batch
    EXPECT_EQ(activation_peak<double>(naive_schedule(2, 2), map, spec, r, true), saved + held) << "rank " << r;
    EXPECT_EQ(activation_peak<double>(both, map, spec, r, true), 2 * saved + held)
        << "rank " << r;
  }
}

DTW_TEST_STEPS(CheckpointMemoryTest, "05.3", "05.5");
TEST(CheckpointMemoryTest, OnHandBuiltStagesTheLedgerShowsTheSavedInputsPlusOneChunk) {
  // The executor alone (steps 05.1, 05.2 and 05.6 not needed): the given
  // naive list, and GPipe's order written with Schedule::forward and
  // backward. A checkpointed forward must let go of its pass, a recompute of
  // the input it read: the ledger's activation peak is then exactly what the
  // list says.
  struct Case {
    const char* model;
    int p, m;
    bool all_in_flight;
  };
  for (const Case& c : {Case{"gpt-tiny", 2, 3, false}, Case{"gpt-tiny", 2, 3, true},
                        Case{"mlp-tiny", 3, 2, true}}) {
    const train::RunSpec spec = tiny(c.model);
    const char* order = c.all_in_flight ? "every micro-batch in flight (GPipe's order)" : "naive";
    DTW_TRACE("hand-built " << order << " stages, " << ::dtw::testing::describe_run(spec, c.p, knobs(c.m))
                            << ", checkpointing: the ledger's activation peak");
    const Schedule s = c.all_in_flight ? testing::all_in_flight(c.p, c.m) : naive_schedule(c.p, c.m);
    const train::RunOutcome out = testing::run_hand_built(spec, c.p, c.m, {.checkpoint = true}, &s);
    ASSERT_TRUE(out.matches) << out.mismatch;
    const StageMap map = make_stage_map(spec, Balance::kBlocks, c.p, 1, c.m, nullptr);
    for (int r = 0; r < c.p; ++r)
      EXPECT_EQ(out.report.memory[r].peak_of(MemoryCategory::kActivations),
                activation_peak<double>(s, map, spec, r, true))
          << c.model << ", " << order << ", p = " << c.p << ", m = " << c.m << ", rank " << r
          << ": with checkpointing a rank holds its saved inputs plus the one chunk being computed";
  }
}

DTW_TEST_STEPS(CheckpointPipelineTest, "05.1", "05.2", "05.3", "05.4", "05.5", "05.6");
TEST(CheckpointPipelineTest, EverySchedulesMatchesTheReference) {
  for (ScheduleKind kind : {ScheduleKind::kNaive, ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (const auto& [p, m] : testing::kGrid)
      for (const char* model : {"gpt-tiny", "mlp-tiny"})
        testing::expect_matches(kind, model, p, m, {"checkpoint=1"});
  for (const auto& [p, m] : testing::kGrid)
    testing::expect_matches(ScheduleKind::kInterleaved, "gpt-tiny", p, m,
                            {"checkpoint=1", "virtual_stages=2"}, 2);
}

TEST(CheckpointPipelineTest, CutsGPipesPeakByTheDerivedRatio) {
  const int p = 2, m = 8;
  const train::RunSpec spec = tiny("gpt-tiny", 1, 1);
  const StageMap map = make_stage_map(spec, Balance::kParams, p, 1, m, nullptr);
  const Schedule s = gpipe_schedule(p, m);
  const train::RunOutcome plain = train::run_ranks<double>(spec, on(p, knobs(m)), pp_gpipe<double>);
  const train::RunOutcome saved =
      train::run_ranks<double>(spec, on(p, knobs(m, {"checkpoint=1"})), pp_gpipe<double>);
  ASSERT_TRUE(plain.matches && saved.matches) << plain.mismatch << saved.mismatch;
  const auto net = train::Network<double>::make(spec.config());
  const train::Batch mb = train::make_batch(spec, 0, 0, m);  // 1 of the 8 sequences
  for (int r = 0; r < p; ++r) {
    const std::int64_t without = plain.report.memory[r].peak_of(MemoryCategory::kActivations);
    const std::int64_t with = saved.report.memory[r].peak_of(MemoryCategory::kActivations);
    EXPECT_EQ(with, activation_peak<double>(s, map, spec, r, true)) << "rank " << r;
    // A: what a chunk's forward keeps; I: its input, all checkpointing keeps.
    const model::UnitRange run = map.chunks[r];
    const double A = static_cast<double>(net->activation_bytes(run, mb));
    const double I = run.begin > 0 ? 8.0 * static_cast<double>(net->boundary_elements(run.begin, mb)) : 0;
    EXPECT_EQ(without, static_cast<std::int64_t>(m * A)) << "rank " << r;
    const double derived = m * A / (m * I + A);
    EXPECT_GE(static_cast<double>(without) / static_cast<double>(with), derived) << "rank " << r;
    EXPECT_GT(derived, 3.0) << "rank " << r << ": gpt-tiny's blocks keep over 20 values per input value";
  }
}

TEST(CheckpointPipelineTest, OneFOneBsPeakIsWhatItsListSays) {
  const int p = 4, m = 8;
  train::RunSpec spec = tiny("gpt-tiny", 1, 1);
  const StageMap map = make_stage_map(spec, Balance::kParams, p, 1, m, nullptr);
  const Schedule s = one_f_one_b_schedule(p, m);
  const train::RunOutcome out =
      train::run_ranks<double>(spec, on(p, knobs(m, {"checkpoint=1"})), pp_1f1b<double>);
  ASSERT_TRUE(out.matches) << out.mismatch;
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(out.report.memory[r].peak_of(MemoryCategory::kActivations),
              activation_peak<double>(s, map, spec, r, true))
        << "rank " << r;
}

TEST(CheckpointPipelineTest, EveryBackwardRecomputesItsForwardOnce) {
  const int p = 3, m = 5;
  const train::RunSpec spec = tiny("gpt-tiny", 1, 2);
  train::HarnessOptions o = on(p, knobs(m, {"checkpoint=1"}));
  o.trace = true;
  const train::RunOutcome out = train::run_ranks<double>(spec, o, pp_1f1b<double>);
  ASSERT_TRUE(out.matches) << out.mismatch;
  std::vector<int> forwards(p), backwards(p), recomputes(p);
  for (const TraceEvent& e : out.report.trace) {
    if (e.name == "forward") ++forwards[e.rank];
    if (e.name == "backward") ++backwards[e.rank];
    if (e.name == "recompute") ++recomputes[e.rank];
  }
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(forwards[r], m * 2) << "rank " << r << ": one forward per micro-batch and step";
    EXPECT_EQ(backwards[r], m * 2) << "rank " << r;
    EXPECT_EQ(recomputes[r], backwards[r]) << "rank " << r << ": one recompute per backward";
  }
}

}  // namespace
}  // namespace dtw::ch05
