// The training layer end to end: plain data parallelism (plain_dp.h) on 1-4
// ranks matches the reference to 1e-9 in double, also with a batch that does
// not divide, and a planted one-element error is named by rank, tensor and
// index. The same file runs under mpiexec (the MPI twin).
#include <gtest/gtest.h>

#include <string>

#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_train_test.h"
#include "plain_dp.h"

namespace dtw::train {
namespace {

RunSpec tiny(const std::string& model, std::int64_t steps, std::int64_t batch) {
  RunSpec spec = standard_run(model);
  spec.steps = steps;
  spec.batch = batch;
  spec.warmup_steps = 2;
  spec.dtype = DType::kFloat64;
  return spec;
}

HarnessOptions on(int ranks) {
  HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(60);
  return o;
}

TEST(PlainDpTest, MatchesTheReferenceInDoubleOnOneToFourRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    const RunSpec spec = tiny(model, 3, 12);
    for (int p = 1; p <= 4; ++p) {
      const RunOutcome out = run_ranks<double>(
          spec, on(p), [](RankRun<double>& run) { testing::plain_dp(run); });
      EXPECT_TRUE(out.matches) << model << " on " << p << " ranks: " << out.mismatch;
      EXPECT_EQ(out.losses.size(), 3u);
      EXPECT_LT(out.max_abs_param_diff, 1e-9) << model << " p=" << p;
      EXPECT_EQ(out.compared, p * reference_run<double>(spec)->layout.size());
    }
  }
}

TEST(PlainDpTest, UnevenShardsAreWeightedByTheirRows) {
  const RunSpec spec = tiny("gpt-tiny", 2, 7);  // 7 rows over 3 ranks: 3, 2, 2
  const RunOutcome out =
      run_ranks<double>(spec, on(3), [](RankRun<double>& run) { testing::plain_dp(run); });
  EXPECT_TRUE(out.matches) << out.mismatch;
}

TEST(PlainDpTest, InsideTheRankFunctionWithTheMacro) {
  const RunSpec spec = tiny("mlp-tiny", 2, 8);
  HarnessOptions o = on(2);
  o.compare = false;  // the rank function compares itself
  run_ranks<double>(spec, o, [&](RankRun<double>& run) {
    testing::plain_dp(run);
    for (const auto& [begin, values] : run.reported())
      DTW_EXPECT_MATCHES_REFERENCE(run.comm().rank(), spec, run.losses(), values, begin);
  });
}

TEST(PlainDpTest, APlantedErrorIsNamedByRankTensorAndIndex) {
  const RunSpec spec = tiny("gpt-tiny", 3, 8);
  const auto& layout = reference_run<double>(spec)->layout;
  const std::int64_t index = layout.find("h.1.attn.qkv.weight").offset + 37;
  const int ranks = 3;
  const RunOutcome out = run_ranks<double>(spec, on(ranks), [&](RankRun<double>& run) {
    testing::plain_dp(run, {.rank = ranks - 1, .step = 2, .index = index});
  });
  EXPECT_FALSE(out.matches);
  const RankOutcome& bad = out.ranks.back();
  EXPECT_FALSE(bad.matches);
  EXPECT_NE(bad.mismatch.find("rank 2, after 3 steps: h.1.attn.qkv.weight[37] (row 0, col 37)"),
            std::string::npos)
      << bad.mismatch;
  EXPECT_NE(bad.mismatch.find("tolerance 1.0000000000000001e-09"), std::string::npos)
      << bad.mismatch;
  EXPECT_NE(out.mismatch.find(bad.mismatch), std::string::npos);  // the other ranks are right
  for (int r = 0; r + 1 < ranks; ++r) EXPECT_TRUE(out.ranks[r].matches) << out.ranks[r].mismatch;
  EXPECT_EQ(out.divergence.step, 3);  // planted in the last step's update
}

// Only the loss differs (a rank records a wrong loss; every parameter is
// right): the first divergence names the loss, not an empty element (it read
// "the largest error then: rank 0, ; at the end: ...").
TEST(PlainDpTest, ADivergenceOfTheLossAloneIsNamed) {
  const RunSpec spec = tiny("gpt-tiny", 3, 8);
  const RunOutcome out = run_ranks<double>(spec, on(2), [&](RankRun<double>& run) {
    testing::plain_dp(run, {.rank = 1, .step = 1, .loss_factor = 1.5, .gradient = false});
  });
  EXPECT_FALSE(out.matches);
  EXPECT_EQ(out.divergence.step, 2) << out.mismatch;
  EXPECT_EQ(out.divergence.ranks, std::vector<int>{1}) << out.mismatch;
  EXPECT_EQ(out.divergence.largest, "") << "no parameter differs";
  EXPECT_EQ(out.mismatch.rfind("first divergence after step 2 of 3, on rank 1; then: rank 1, ", 0),
            0u)
      << out.mismatch;
  EXPECT_NE(out.mismatch.find("loss"), std::string::npos) << out.mismatch;
  EXPECT_EQ(out.mismatch.find(", ;"), std::string::npos) << out.mismatch;
}

// A perturbation on one rank spreads to all through the next allreduce; at
// the end the lowest rank's first element in layer order is wrong, which is
// not where it began. The harness reruns on fewer steps and names the first
// step, the rank and the element with the largest error then.
TEST(PlainDpTest, ADivergenceIsTracedToItsFirstStepRankAndElement) {
  const RunSpec spec = tiny("gpt-tiny", 4, 8);
  const auto& layout = reference_run<double>(spec)->layout;
  const std::int64_t index = layout.find("wte").offset + 1000;
  const RunOutcome out = run_ranks<double>(spec, on(4), [&](RankRun<double>& run) {
    testing::plain_dp(run, {.rank = 2, .step = 1, .index = index});
  });
  EXPECT_FALSE(out.matches);
  EXPECT_FALSE(out.ranks[0].matches) << "the error has spread to rank 0 by the end";
  EXPECT_EQ(out.divergence.step, 2) << out.mismatch;
  EXPECT_EQ(out.divergence.ranks, std::vector<int>{2}) << out.mismatch;
  EXPECT_NE(out.divergence.largest.find("rank 2, after 2 steps: wte[1000] (row 15, col 40)"),
            std::string::npos)
      << out.divergence.largest;
  EXPECT_EQ(out.mismatch.rfind("first divergence after step 2 of 4, on rank 2; the largest error "
                               "then: rank 2, after 2 steps: wte[1000]",
                               0),
            0u)
      << out.mismatch;
}

TEST(PlainDpTest, AStrategyThatReportsNothingOrHalfDoesNotMatch) {
  const RunSpec spec = tiny("gpt-tiny", 2, 8);
  const std::int64_t n = reference_run<double>(spec)->layout.size();
  // Nothing reported: the gradients could be anything.
  RunOutcome out = run_ranks<double>(spec, on(3), [](RankRun<double>& run) {
    testing::plain_dp(run, {.reported = 0});
  });
  EXPECT_FALSE(out.matches);
  EXPECT_EQ(out.covered, 0);
  EXPECT_EQ(out.model_elements, n);
  EXPECT_NE(out.mismatch.find("parameters reported by no rank"), std::string::npos) << out.mismatch;
  EXPECT_NE(out.mismatch.find("rank 2 reported 0 of "), std::string::npos) << out.mismatch;
  // Half reported, with a wrong element in the other half.
  const std::int64_t wrong = n - 10;
  out = run_ranks<double>(spec, on(2), [&](RankRun<double>& run) {
    testing::plain_dp(run, {.rank = 1, .step = 0, .index = wrong, .reported = 0.5});
  });
  EXPECT_FALSE(out.matches);
  EXPECT_EQ(out.covered, n / 2);
  EXPECT_EQ(out.divergence.step, -1) << "nothing reported diverged: no origin to look for";
  EXPECT_NE(out.mismatch.find("(flat index " + std::to_string(n / 2) + ")"), std::string::npos)
      << out.mismatch;
  // Everything reported: covered, and a match.
  out = run_ranks<double>(spec, on(2), [](RankRun<double>& run) { testing::plain_dp(run); });
  EXPECT_TRUE(out.matches) << out.mismatch;
  EXPECT_EQ(out.covered, n);
}

TEST(PlainDpTest, FloatRunsCompareLossCurves) {
  RunSpec spec = tiny("gpt-tiny", 3, 8);
  spec.dtype = DType::kFloat32;
  const RunOutcome out =
      run_ranks<float>(spec, on(2), [](RankRun<float>& run) { testing::plain_dp(run); });
  EXPECT_TRUE(out.matches) << out.mismatch;
  EXPECT_GT(out.max_abs_param_diff, 0.0);  // reported, not judged
  EXPECT_LT(out.max_abs_param_diff, 1e-3);
}

}  // namespace
}  // namespace dtw::train
