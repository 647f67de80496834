// Step 05.1: the stage split. The partition is optimal (checked against
// brute force), every unit lands in exactly one chunk, the tied embedding
// has a copy on the head's stage, time balancing agrees on every rank, and
// impossible splits are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "dtw/model/params.h"
#include "dtw/train/network.h"
#include "dtw/results.h"
#include "dtw_test.h"
#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::error_of;

// The smallest possible largest run, by trying every cut.
double brute_force(const std::vector<double>& costs, int chunks) {
  const int n = static_cast<int>(costs.size());
  double best = std::numeric_limits<double>::infinity();
  std::function<void(int, int, double)> go = [&](int at, int left, double worst) {
    if (left == 1) {
      double s = 0;
      for (int u = at; u < n; ++u) s += costs[u];
      best = std::min(best, std::max(worst, s));
      return;
    }
    double s = 0;
    for (int b = at + 1; b + left - 1 <= n; ++b) {
      s += costs[b - 1];
      go(b, left - 1, std::max(worst, s));
    }
  };
  go(0, chunks, 0);
  return best;
}

DTW_TEST_STEPS(StageSplitTest, "05.1");
TEST(StageSplitTest, MinimisesTheLargestRunAndCoversEveryUnitOnce) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> cost(0, 9);
  for (int n = 1; n <= 8; ++n) {
    for (int k = 1; k <= n; ++k) {
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<double> costs(static_cast<std::size_t>(n));
        for (double& c : costs) c = cost(rng);
        DTW_TRACE("split_units of " << n << " units into " << k << " runs, trial " << trial);
        const auto runs = split_units(costs, k);
        ASSERT_EQ(runs.size(), static_cast<std::size_t>(k)) << "n " << n << ", k " << k;
        double worst = 0;
        for (int j = 0; j < k; ++j) {
          ASSERT_EQ(runs[j].begin, j == 0 ? 0 : runs[j - 1].end) << "runs must be contiguous";
          ASSERT_LT(runs[j].begin, runs[j].end) << "run " << j << " is empty";
          double s = 0;
          for (int u = runs[j].begin; u < runs[j].end; ++u) s += costs[u];
          worst = std::max(worst, s);
        }
        ASSERT_EQ(runs.back().end, n);
        EXPECT_EQ(worst, brute_force(costs, k)) << "n " << n << ", k " << k << ", trial " << trial;
      }
    }
  }
}

TEST(StageSplitTest, EarlierRunsTakeAsManyUnitsAsTheyCan) {
  // {1,1 | 1,1} and {1,1,1 | 1}... cost 2 is the optimum; among cuts with
  // largest run 2 the first run takes two units, not one.
  const std::vector<double> costs{1, 1, 1, 1};
  const auto runs = split_units(costs, 2);
  EXPECT_EQ(runs[0].end, 2);
  // Zero-cost units join the run before them.
  const auto zeros = split_units(std::vector<double>{5, 0, 0, 5}, 2);
  EXPECT_EQ(zeros[0].end, 3);
}

TEST(StageSplitTest, ParamsBalanceKeepsTheEmbeddingWithTheFirstBlock) {
  // gpt-tiny: embed 8 192 parameters, each block about 50 000, head 128.
  const train::RunSpec spec = testing::tiny("gpt-tiny");
  const model::ParamLayout layout = model::param_layout(spec.config());
  const auto units = model::model_units(spec.config(), layout);
  const StageMap two = make_stage_map(spec, Balance::kParams, 2, 1, 1, nullptr);
  EXPECT_EQ(two.describe(units), "[embed h.0] [h.1 head]");
  const StageMap four = make_stage_map(spec, Balance::kParams, 4, 1, 1, nullptr);
  EXPECT_EQ(four.describe(units), "[embed] [h.0] [h.1] [head]");
  const StageMap blocks = make_stage_map(spec, Balance::kBlocks, 2, 1, 1, nullptr);
  EXPECT_EQ(blocks.describe(units), "[embed h.0] [h.1 head]");
  // Interleaved: chunk c on rank c mod p.
  const StageMap v2 = make_stage_map(spec, Balance::kParams, 2, 2, 1, nullptr);
  EXPECT_EQ(v2.chunks_of(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(v2.chunks_of(1), (std::vector<int>{1, 3}));
}

TEST(StageSplitTest, TheTiedHeadsStageHoldsACopyOfTheEmbeddingWithoutOptimizerState) {
  DTW_TRACE("stage_plan of gpt-tiny on 2 ranks: the tied head's copy of wte");
  const train::RunSpec spec = testing::tiny("gpt-tiny");
  const model::ParamLayout layout = model::param_layout(spec.config());
  const auto units = model::model_units(spec.config(), layout);
  const std::int64_t wte = layout.find("wte").size;
  const StageMap map = make_stage_map(spec, Balance::kParams, 2, 1, 1, nullptr);
  const train::ReplicaPlan first = stage_plan(map, units, wte, 0);
  const train::ReplicaPlan last = stage_plan(map, units, wte, 1);
  ASSERT_EQ(first.params.size(), 1u);
  EXPECT_EQ(first.params[0].begin, 0);
  EXPECT_EQ(first.params[0].end, units[1].end);
  EXPECT_EQ(first.optimizer.size(), 1u);
  ASSERT_EQ(last.params.size(), 2u) << last.describe();
  EXPECT_EQ(last.params[0].begin, 0);
  EXPECT_EQ(last.params[0].end, wte);
  EXPECT_EQ(last.grads.size(), 2u) << last.describe();
  ASSERT_EQ(last.optimizer.size(), 1u) << "wte must be stepped once, by the embedding's rank";
  EXPECT_EQ(last.optimizer[0].begin, units[2].begin);
  EXPECT_EQ(last.optimizer[0].end, layout.size());
  // One rank holds everything, in one range.
  const StageMap one = make_stage_map(spec, Balance::kParams, 1, 2, 1, nullptr);
  const train::ReplicaPlan all = stage_plan(one, units, wte, 0);
  ASSERT_EQ(all.params.size(), 1u) << all.describe();
  EXPECT_EQ(all.params[0].end, layout.size());
  // The MLP has no tied weights: nothing extra.
  const train::RunSpec mlp = testing::tiny("mlp-tiny");
  const auto mlp_units = model::model_units(mlp.config(), model::param_layout(mlp.config()));
  const StageMap mmap = make_stage_map(mlp, Balance::kParams, 3, 1, 1, nullptr);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(stage_plan(mmap, mlp_units, 0, r).params.size(), 1u);
}

DTW_TEST_STEPS(StageTimesTest);
TEST(StageTimesTest, FlopsBalanceCountsEachUnitsForwardOnEveryRankAlike) {
  // Counted, not measured: no communicator, and the same costs everywhere.
  DTW_TRACE("unit_costs(gpt-small, balance=flops): each unit's forward FLOPs on micro-batch 0");
  const train::RunSpec spec = testing::tiny("gpt-small");
  const std::vector<double> costs = unit_costs(spec, Balance::kFlops, 2, nullptr);
  const auto net = train::Network<double>::make(spec.config());
  const train::Batch batch = train::make_batch(spec, 0, 0, 2);
  ASSERT_EQ(costs.size(), 6u);  // embed, h.0 ... h.3, head
  for (int u = 0; u < 6; ++u)
    EXPECT_EQ(costs[static_cast<std::size_t>(u)], net->forward_flops({u, u + 1}, batch)) << "unit " << u;
  // The blocks cost alike; the head's product with the vocabulary costs more
  // than the embedding's lookup, which holds far more parameters.
  for (int u = 2; u < 5; ++u) EXPECT_EQ(costs[static_cast<std::size_t>(u)], costs[1]);
  EXPECT_GT(costs[5], costs[0]);
  EXPECT_EQ(name_of(balance_from_name("flops")), std::string("flops"));
}

TEST(StageTimesTest, TimeBalanceIsMeasuredOnceAndAgreesOnEveryRank) {
  const train::RunSpec spec = testing::tiny("gpt-tiny");
  dtw::testing::launch_bounded(3, [&](Comm& comm) {
    const std::vector<double> costs = unit_costs(spec, Balance::kTime, 2, &comm);
    const auto all = allgather_results(comm, costs);
    for (std::size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r;
    ASSERT_EQ(costs.size(), 4u);
    for (double c : costs) EXPECT_GT(c, 0.0);
    // The head multiplies by the 96 × 64 vocabulary: it is not the cheapest
    // unit, though it holds the fewest parameters.
    EXPECT_GT(costs[3], std::min(costs[0], costs[1]));
  });
}

DTW_TEST_STEPS(StageSplitArgumentsTest);
TEST(StageSplitArgumentsTest, ImpossibleSplitsAreClearErrors) {
  EXPECT_NE(error_of<InvalidArgument>([] { split_units(std::vector<double>{1, 2}, 3); })
                .find("3 chunks of 2 units"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([] { split_units(std::vector<double>{1, 2}, 0); })
                .find("0 chunks"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([] { split_units(std::vector<double>{1, -2}, 1); })
                .find("unit 1 costs -2"),
            std::string::npos);
  const train::RunSpec mlp = testing::tiny("mlp-tiny");
  EXPECT_NE(error_of<InvalidArgument>([&] { make_stage_map(mlp, Balance::kParams, 4, 1, 1, nullptr); })
                .find("4 ranks × 1 chunk(s) each need 4 units, but mlp-tiny has 3 (fc.0 fc.1 fc.2)"),
            std::string::npos);
  const train::RunSpec gpt = testing::tiny("gpt-tiny");
  EXPECT_NE(error_of<InvalidArgument>([&] { make_stage_map(gpt, Balance::kBlocks, 1, 3, 1, nullptr); })
                .find("the 2 blocks of gpt-tiny do not divide into p·v = 1·3 = 3 chunks"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { unit_costs(gpt, Balance::kTime, 1, nullptr); })
                .find("needs the ranks' communicator"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([] { balance_from_name("memory"); }).find("balance=memory"),
            std::string::npos);
}

}  // namespace
}  // namespace dtw::ch05
