// The composed run: every layout of 8 ranks (and of 4, and of 6 with t = 3)
// trains gpt-tiny to match train_reference in double, with and without
// ZeRO-1 on the dp group; every element of the model is reported by some
// rank.
#include "hybrid_test.h"

namespace dtw::ch08 {
namespace {

using testing::layout;
using testing::tiny;

void expect_matches(const train::RunSpec& spec, const Layout& l) {
  DTW_TRACE("hybrid " + l.describe() + ", " + ::dtw::testing::describe_run(spec, l.ranks()));
  const train::RunOutcome out = testing::run_layout(spec, l);
  EXPECT_TRUE(out.matches) << l.describe() << ": " << out.mismatch;
  EXPECT_EQ(out.losses.size(), static_cast<std::size_t>(spec.steps)) << l.describe();
  EXPECT_EQ(out.covered, model::param_layout(spec.config()).size()) << l.describe();
}

// pp · dp · tp = 8 with pp ≤ 4 units and tp | 4 heads.
std::vector<Layout> layouts_of_eight(bool zero1) {
  std::vector<Layout> out;
  for (int pp : {1, 2, 4})
    for (int tp : {1, 2, 4}) {
      if (8 % (pp * tp) != 0) continue;
      const int dp = 8 / (pp * tp);
      out.push_back(layout(pp, dp, tp, std::max(1, std::min(2 * pp, 8 / dp)), zero1));
    }
  return out;
}

DTW_TEST_STEPS(HybridTest, "08.1", "08.2", "08.3", "08.4");
TEST(HybridTest, EveryLayoutOfEightRanksMatchesTheReference) {
  for (const Layout& l : layouts_of_eight(false)) expect_matches(tiny(), l);
}

TEST(HybridTest, EveryLayoutOfEightRanksWithZeroOneMatchesTheReference) {
  for (const Layout& l : layouts_of_eight(true))
    if (l.dp > 1) expect_matches(tiny(), l);
}

// The MPI twin runs this one (at np 2, 3 and 4 its worlds are processes).
TEST(HybridTest, LayoutsOfTwoThreeAndFourRanksMatchTheReference) {
  for (const Layout& l : {layout(2, 1, 1, 3), layout(1, 1, 2, 1), layout(1, 2, 1, 2, true),
                          layout(3, 1, 1, 4), layout(1, 3, 1, 2, true),
                          layout(2, 1, 2, 3), layout(2, 2, 1, 1), layout(1, 2, 2, 2),
                          layout(4, 1, 1, 5), layout(2, 2, 1, 3, true)})
    expect_matches(tiny(3, 12), l);
}

TEST(HybridTest, LayoutsOfSixRanksWithThreeSlicesMatchTheReference) {
  for (const Layout& l : {layout(2, 1, 3, 2), layout(1, 2, 3, 3), layout(2, 1, 3, 3, false)})
    expect_matches(testing::twelve_heads(), l);
}

TEST(HybridTest, AnMlpMatchesTheReferenceWithoutTensorParallelism) {
  // mlp-tiny has 3 units and nothing to cut: pp and dp only.
  train::RunSpec spec = train::standard_run("mlp-tiny");
  spec.steps = 3;
  spec.batch = 12;
  spec.warmup_steps = 1;
  spec.clip_norm = 0.05;
  spec.dtype = train::DType::kFloat64;
  for (const Layout& l : {layout(3, 1, 1, 4), layout(1, 2, 1, 2), layout(2, 2, 1, 3, true)})
    expect_matches(spec, l);
}

DTW_TEST_STEPS(HybridArgumentsTest, "08.1", "08.4");
TEST(HybridArgumentsTest, EveryRankRefusesABadLayoutBeforeAnyMessage) {
  DTW_TRACE("train_hybrid with pp 2 × dp 2 × tp 3 on 8 ranks");
  ::dtw::testing::expect_error(
      [] {
        train::run_ranks<double>(tiny(), testing::on(8), [](train::RankRun<double>& run) {
          train_hybrid(run, layout(2, 2, 3, 1));
        });
      },
      {"is 12 ranks, not 8"});
}

}  // namespace
}  // namespace dtw::ch08
