// The reference: train_reference is the memoised reference run, computed once
// for many rank threads; comparisons name the first divergent element and
// compute each tensor's scale once, however finely a rank reports it.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/trainer.h"
#include "dtw/train/reference.h"
#include "reference_work.h"

namespace dtw::train {
namespace {

RunSpec tiny() {
  RunSpec spec = standard_run("gpt-tiny");
  spec.steps = 3;
  spec.batch = 4;
  spec.dtype = DType::kFloat64;
  return spec;
}

TEST(ReferenceTest, TrainReferenceIsTheReferenceRun) {
  const RunSpec spec = tiny();
  const auto run = reference_run<double>(spec);
  const auto direct = model::train_reference<double>(spec.config(), spec.steps, spec.options());
  EXPECT_EQ(direct.losses, run->losses);
  EXPECT_EQ(direct.params, run->params.back());
  ASSERT_EQ(run->params.size(), 4u);
  EXPECT_EQ(*reference_params<double>(spec, 0), run->params[0]);
  // A shorter run is a prefix of the longer one.
  RunSpec two = spec;
  two.steps = 2;
  EXPECT_EQ(reference_run<double>(two)->params.back(), run->params[2]);
}

TEST(ReferenceTest, RankThreadsShareOneComputation) {
  RunSpec spec = tiny();
  spec.seed = 77;  // not computed by another test
  std::vector<std::shared_ptr<const ReferenceRun<double>>> got(6);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] { got[t] = reference_run<double>(spec); });
  for (auto& t : threads) t.join();
  for (int t = 1; t < 6; ++t) EXPECT_EQ(got[t].get(), got[0].get());
}

TEST(ReferenceTest, ComparisonNamesTheFirstDivergentElementInLayerOrder) {
  const RunSpec spec = tiny();
  const auto run = reference_run<double>(spec);
  std::vector<double> p = run->params.back();
  const auto& fc = run->layout.find("h.0.mlp.fc.weight");
  const auto& proj = run->layout.find("h.1.attn.proj.weight");
  p[proj.offset + 5] += 1e-3;  // later in layer order
  p[fc.offset + 70] *= 1 + 1e-6;  // row 1, col 6 of [256, 64]
  const ReferenceCheck c =
      compare_to_reference<double>(2, spec, run->losses, p, 0, kDoubleTolerance);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.message.find("rank 2, after 3 steps: h.0.mlp.fc.weight[70] (row 1, col 6)"),
            std::string::npos)
      << c.message;
  EXPECT_NE(c.message.find("tolerance 1.0000000000000001e-09"), std::string::npos);
  EXPECT_GT(c.max_abs_diff, 0.99e-3);
  // A slice of the model compared at its own offset; an exact copy passes.
  const std::vector<double> slice(run->params.back().begin() + fc.offset,
                                  run->params.back().begin() + fc.offset + fc.size);
  const ReferenceCheck ok =
      compare_to_reference<double>(0, spec, {}, slice, fc.offset, kDoubleTolerance, 3);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(ok.compared, fc.size);
  // A loss off by more than the tolerance names the step.
  std::vector<double> losses = run->losses;
  losses[1] *= 1 + 1e-7;
  const ReferenceCheck l = compare_to_reference<double>(1, spec, losses, {}, 0);
  EXPECT_NE(l.message.find("rank 1, step 1: loss"), std::string::npos) << l.message;
  EXPECT_THROW(compare_to_reference<double>(0, spec, {}, slice, run->layout.size() - 3),
               InvalidArgument);
}

TEST(ReferenceTest, ATensorReportedRowByRowGetsTheSameVerdictAndItsScaleOnce) {
  RunSpec spec = tiny();
  spec.seed = 78;  // not computed by another test: the scales are new
  const auto run = reference_run<double>(spec);
  const auto& fc = run->layout.find("h.0.mlp.fc.weight");  // [256, 64]
  const std::int64_t cols = fc.shape[1], rows = fc.shape[0];
  std::vector<double> p(run->params.back().begin() + fc.offset,
                        run->params.back().begin() + fc.offset + fc.size);
  p[static_cast<std::size_t>(3 * cols + 9)] *= 1 + 1e-6;  // row 3, col 9
  const std::int64_t before = reference_scales_computed();
  const ReferenceCheck whole =
      compare_to_reference<double>(0, spec, {}, p, fc.offset, kDoubleTolerance, 3);
  ReferenceCheck by_rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    const ReferenceCheck c = compare_to_reference<double>(
        0, spec, {}, std::span<const double>(p).subspan(static_cast<std::size_t>(r * cols),
                                                         static_cast<std::size_t>(cols)),
        fc.offset + r * cols, kDoubleTolerance, 3);
    if (by_rows.ok && !c.ok) {
      by_rows.ok = false;
      by_rows.message = c.message;
    }
    by_rows.max_abs_diff = std::max(by_rows.max_abs_diff, c.max_abs_diff);
    by_rows.max_rel_error = std::max(by_rows.max_rel_error, c.max_rel_error);
    by_rows.compared += c.compared;
  }
  EXPECT_FALSE(whole.ok);
  EXPECT_NE(whole.message.find("h.0.mlp.fc.weight[201] (row 3, col 9)"), std::string::npos)
      << whole.message;
  EXPECT_EQ(by_rows.ok, whole.ok);
  EXPECT_EQ(by_rows.message, whole.message);
  EXPECT_EQ(by_rows.max_abs_diff, whole.max_abs_diff);
  EXPECT_EQ(by_rows.max_rel_error, whole.max_rel_error);
  EXPECT_EQ(by_rows.compared, fc.size);
  // One scale per tensor of the model for this step, by the first call; the
  // 256 rows after it compute none (they computed 256 passes over the tensor).
  EXPECT_EQ(reference_scales_computed() - before,
            static_cast<std::int64_t>(run->layout.views().size()));
}

}  // namespace
}  // namespace dtw::train
