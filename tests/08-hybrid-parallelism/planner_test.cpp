// Step 08.5: the planner. Its memory equals what every rank's ledger
// measured (parameters, gradients, optimizer state, activations) for every
// layout of 8 ranks, with and without ZeRO-1; its predicted step times rank
// the layouts in the order their runs, replayed on the modeled cluster,
// take (Spearman's ρ ≥ 0.8 over at least 10 layouts); a memory cap drops
// exactly the layouts over it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dtw/train/micro_batches.h"
#include "dtw/train/network.h"
#include "hybrid_test.h"

namespace dtw::ch08 {
namespace {

using testing::layout;
using testing::tiny;

const MemoryCategory kCounted[] = {MemoryCategory::kParameters, MemoryCategory::kGradients,
                                   MemoryCategory::kOptimizerState, MemoryCategory::kActivations};

// The planner's memory without a run: one rank holds the whole model, and
// under ZeRO-1 the replicas' optimizer states add up to one copy (each
// element stepped by one replica) while each still holds every parameter.
// Only 08.2 and 08.5 code runs here, so a learner reaches 08.5 with it.
DTW_TEST_STEPS(RankMemoryTest, "08.2", "08.5");
TEST(RankMemoryTest, ZeroOneCutsTheOptimizerStateOverTheReplicasAndNothingElse) {
  const train::RunSpec spec = tiny(1);
  const double e = 8, whole = static_cast<double>(model::param_layout(spec.config()).size());
  const double moments = spec.optimizer == model::Optimizer::kAdamW ? 2 : 1;
  const auto at = [](const train::MemoryFigures& f, MemoryCategory k) { return f[static_cast<std::size_t>(k)]; };
  {
    DTW_TRACE("memory of " + layout(1, 1, 1, 1).describe() + ", rank 0");
    const train::MemoryFigures one = rank_memory(spec, layout(1, 1, 1, 1), {0, 0, 0});
    EXPECT_EQ(at(one, MemoryCategory::kParameters), whole * e) << "one rank: parameters";
    EXPECT_EQ(at(one, MemoryCategory::kGradients), whole * e) << "one rank: gradients";
    EXPECT_EQ(at(one, MemoryCategory::kOptimizerState), moments * whole * e) << "one rank: optimizer state";
  }
  double stepped = 0;
  for (int d = 0; d < 2; ++d) {
    DTW_TRACE("memory of " + layout(1, 2, 1, 1, true).describe() + ", replica " + std::to_string(d));
    const train::MemoryFigures f = rank_memory(spec, layout(1, 2, 1, 1, true), {0, d, 0});
    EXPECT_EQ(at(f, MemoryCategory::kParameters), whole * e) << "ZeRO-1 replica " << d << ": parameters stay whole";
    EXPECT_EQ(at(f, MemoryCategory::kGradients), whole * e) << "ZeRO-1 replica " << d << ": gradients stay whole";
    EXPECT_LT(at(f, MemoryCategory::kOptimizerState), moments * whole * e) << "ZeRO-1 replica " << d;
    stepped += at(f, MemoryCategory::kOptimizerState);
  }
  EXPECT_EQ(stepped, moments * whole * e) << "ZeRO-1 on 2 replicas: the optimizer states add up to one copy";
}

// The prediction's parts, each against the text's cost model written out
// here for two float32 layouts: one rank (compute and the optimizer alone)
// and pp 2 × tp 2 (the bubble, tp's allreduces, the boundary messages).
// Only 08.5's code runs (with 08.1's check and 08.2's plan in it).
DTW_TEST_STEPS(PredictTest, "08.1", "08.2", "08.5");
TEST(PredictTest, ThePartsOfAStepFollowTheCostModelInTheRunsElementType) {
  train::RunSpec spec = tiny(1, 8);
  spec.dtype = train::DType::kFloat32;
  const train::Cluster& cluster = train::find_gpu_cluster("nvlink-8");
  const model::ModelConfig c = spec.config();
  const double psi = static_cast<double>(model::param_layout(c).size());
  auto near = [](double got, double want) { return std::abs(got - want) <= 1e-9 * std::max(1e-12, std::abs(want)); };
  {
    DTW_TRACE("predict " + layout(1, 1, 1, 1).describe() + ", gpt-tiny float32 on nvlink-8");
    const Prediction p = predict(spec, layout(1, 1, 1, 1), cluster);
    const auto net = train::Network<float>::make(c);
    const train::Batch batch = train::micro_batch(spec, 0, 0, 1, 0, 1);
    const double compute = 3 * net->forward_flops(net->all(), batch) / cluster.flops +
                           3 * static_cast<double>(net->activation_bytes(net->all(), batch)) / cluster.memory_bw;
    EXPECT_TRUE(near(p.compute_s, compute))
        << "compute " << p.compute_s << " s, the cost model says " << compute
        << " s: 3 × the forward FLOPs over the device's FLOP/s plus 3 × the bytes the forward keeps "
           "(in float32: 4 bytes a value) over its memory bandwidth";
    EXPECT_EQ(p.bubble_s, 0) << "one stage has no bubble";
    EXPECT_EQ(p.tp_s, 0) << "one slice sends nothing";
    EXPECT_EQ(p.dp_s, 0) << "one replica sends nothing";
    const double optimizer = 7 * psi * 4 / cluster.memory_bw;
    EXPECT_TRUE(near(p.optimizer_s, optimizer))
        << "optimizer " << p.optimizer_s << " s, the cost model says " << optimizer
        << " s: AdamW's 7 values of 4 bytes per stepped element over the memory bandwidth";
    EXPECT_TRUE(near(p.step_s, p.compute_s + p.optimizer_s)) << "the step is the sum of its parts";
  }
  {
    const Layout l = layout(2, 1, 2, 4);
    DTW_TRACE("predict " + l.describe() + ", gpt-tiny float32 on nvlink-8");
    const Prediction p = predict(spec, l, cluster);
    EXPECT_NEAR(p.bubble_s / (p.compute_s + p.tp_s), 1.0 / 4, 1e-12)
        << "1F1B's bubble is (pp − 1) micro-batch times of the busiest stage: (pp − 1)/m of its "
           "m micro-batches' compute and tp time";
    // gpt-tiny cut in two by parameters: [embed h.0] [h.1 head]: 1 + 4 and
    // 4 + 1 allreduces per micro-batch, each a ring over 2 ranks of
    // 2 (rows · C · 4 bytes) / 2 per round, two rounds.
    const double rows_c_bytes = 2.0 * 32 * 64 * 4;  // 8 sequences / m 4 = 2, of 32 tokens, C = 64
    const double allreduce = 2 * cluster.intra.seconds(rows_c_bytes / 2);
    EXPECT_TRUE(near(p.tp_s, 4 * 5 * allreduce))
        << "tp " << p.tp_s << " s, the cost model says " << 4 * 5 * allreduce
        << " s: m = 4 micro-batches × 5 ring allreduces of a micro-batch's rows · C values";
    EXPECT_TRUE(near(p.pp_s, 2.0 * (4 + 2 - 2) * cluster.intra.seconds(rows_c_bytes)))
        << "pp " << p.pp_s << " s: 2 (m + pp − 2) boundary messages of rows · C values";
  }
}

DTW_TEST_STEPS(PlannerMemoryTest, "08.1", "08.2", "08.3", "08.4", "08.5");
TEST(PlannerMemoryTest, EveryRanksPredictedMemoryEqualsItsLedgersPeak) {
  // Every layout of 8 ranks gpt-tiny runs, m = min(2·pp, 8/dp), with and
  // without ZeRO-1; all predicted before any runs.
  const train::RunSpec spec = tiny(1);
  std::vector<Layout> layouts;
  for (int pp : {1, 2, 4})
    for (int tp : {1, 2, 4})
      for (bool zero1 : {false, true}) {
        const int dp = 8 / (pp * tp);
        if (dp * pp * tp == 8 && (dp > 1 || !zero1))
          layouts.push_back(layout(pp, dp, tp, std::min(2 * pp, 8 / dp), zero1));
      }
  std::vector<std::vector<train::MemoryFigures>> predicted(layouts.size());
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    for (int r = 0; r < 8; ++r)
      predicted[i].push_back(rank_memory(spec, l, {r / (l.tp * l.dp), r / l.tp % l.dp, r % l.tp}));
  }
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    DTW_TRACE("memory of " + l.describe());
    const train::RunOutcome out = testing::run_layout(spec, l);
    ASSERT_TRUE(out.matches) << l.describe() << ": " << out.mismatch;
    for (int r = 0; r < 8; ++r) {
      const train::MemoryFigures& want = predicted[i][static_cast<std::size_t>(r)];
      for (MemoryCategory cat : kCounted)
        EXPECT_EQ(static_cast<std::int64_t>(want[static_cast<std::size_t>(cat)]),
                  out.report.memory[static_cast<std::size_t>(r)].peak_of(cat))
            << l.describe() << ", rank " << r << ", " << name_of(cat);
    }
  }
}

// Ranks of `v` (1 = smallest), ties averaged.
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2) + 1;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> x = ranks_of(a), y = ranks_of(b);
  const double n = static_cast<double>(x.size()), mean = (n + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mean) * (y[i] - mean);
    sxx += (x[i] - mean) * (x[i] - mean);
    syy += (y[i] - mean) * (y[i] - mean);
  }
  return sxy / std::sqrt(sxx * syy);
}

DTW_TEST_STEPS(PlannerRankingTest, "08.1", "08.2", "08.3", "08.4", "08.5");
TEST(PlannerRankingTest, PredictedStepTimesRankTheLayoutsAsTheirReplayedRunsDo) {
  // gpt-tiny on 8 ranks: every layout, m of 2 and 4 where the batch allows,
  // each run once and replayed on two clusters: one node of NVLink, and
  // eight GPUs on PCIe (every link slower, so the layouts' order changes).
  train::RunSpec spec = tiny(2, 16);
  const std::vector<Layout> layouts = valid_layouts(spec, 8, {2, 4}, false);
  ASSERT_GE(layouts.size(), 10u);
  std::vector<train::RunOutcome> runs;
  for (const Layout& l : layouts) {
    train::HarnessOptions o = testing::on(8);
    o.trace = true;
    runs.push_back(train::run_ranks<double>(
        spec, o, [&](train::RankRun<double>& run) { train_hybrid(run, l); }));
    ASSERT_TRUE(runs.back().matches) << l.describe() << ": " << runs.back().mismatch;
  }
  for (const char* name : {"nvlink-8", "pcie-8"}) {
    const train::Cluster& cluster = train::find_gpu_cluster(name);
    std::vector<double> predicted, replayed;
    std::string table;
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      const train::Replay replay = train::replay_on(runs[i].report.trace, 8, cluster);
      predicted.push_back(predict(spec, layouts[i], cluster).step_s);
      replayed.push_back(replay.seconds / static_cast<double>(spec.steps));
      table += "\n  " + layouts[i].describe() + ": predicted " + std::to_string(predicted.back() * 1e6) +
               " µs, replayed " + std::to_string(replayed.back() * 1e6) + " µs";
    }
    const double rho = spearman(predicted, replayed);
    EXPECT_GE(rho, 0.8) << name << ": Spearman's rho " << rho << " over " << predicted.size()
                        << " layouts:" << table;
  }
}

TEST(PlannerRankingTest, AMemoryCapDropsExactlyTheLayoutsOverIt) {
  const train::RunSpec spec = tiny(1);
  const train::Cluster& cluster = train::find_gpu_cluster("nvlink-8");
  const std::vector<Prediction> all = plan(spec, 8, cluster, 0, {});
  ASSERT_GE(all.size(), 6u);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].step_s, all[i].step_s) << "best first";
  std::vector<double> totals;
  for (const Prediction& p : all) totals.push_back(p.memory_total);
  std::sort(totals.begin(), totals.end());
  const double cap = totals[totals.size() / 2];
  const std::vector<Prediction> capped = plan(spec, 8, cluster, cap, {});
  std::size_t under = 0;
  for (double t : totals) under += t <= cap ? 1 : 0;
  EXPECT_EQ(capped.size(), under);
  for (const Prediction& p : capped) EXPECT_LE(p.memory_total, cap) << p.layout.describe();
}

}  // namespace
}  // namespace dtw::ch08
