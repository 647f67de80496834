// Step 05.3's executor composed (what chapter 08 builds on): a world of 4 as
// a grid dp 2 × pp 2, two data-parallel replicas of a 2-stage pipeline. Each
// pipeline runs on its own group (Grid::group("pp")), takes its micro-batches
// from the training layer's rule (replica r's k-th of m is shard r·m + k of
// 2m), and ends each step with a callback that allreduces the gradients over
// its data-parallel group, then the norm over the pipeline and the loss over
// the world, and clips and steps. Every rank matches the single-device
// reference, which it can only do if the replicas trained on different
// halves of the batch and summed them.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "dtw/model/params.h"
#include "dtw/reference.h"
#include "dtw/train/grid.h"
#include "dtw/train/micro_batches.h"
#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::on;
using testing::tiny;

// Trains `spec` on a world of 4: dp 2 × pp 2, 1F1B with m micro-batches per
// replica and step.
train::RunOutcome run_dp_pp(const train::RunSpec& spec, int m) {
  DTW_TRACE("dp 2 × pp 2, 1F1B, " << ::dtw::testing::describe_run(spec, 4, testing::knobs(m)));
  return train::run_ranks<double>(spec, on(4), [&](train::RankRun<double>& run) {
    const train::Grid grid(run.comm(), {{"dp", 2}, {"pp", 2}});
    Comm& pp = grid.group("pp");
    Comm& dp = grid.group("dp");
    Comm& all = grid.group({"dp", "pp"});
    const int stage = pp.rank(), replica_rank = dp.rank(), replicas = dp.size();
    const StageMap map = make_stage_map(spec, Balance::kParams, pp.size(), 1, m, nullptr);
    const model::ModelConfig config = spec.config();
    const model::ParamLayout layout = model::param_layout(config);
    const bool tied = model::head_is_tied(config);
    const std::int64_t wte_end = tied ? layout.find("wte").offset + layout.find("wte").size : 0;
    train::Replica<double> replica(
        spec, run.exec(), stage_plan(map, model::model_units(config, layout), wte_end, stage));

    ExecutorHooks<double> hooks;
    hooks.micro_batches = [&](std::int64_t step, int mb, int micro_batches) {
      return train::micro_batch(spec, step, replica_rank, replicas, mb, micro_batches);
    };
    hooks.end_of_step = [&](const StepEnd<double>& end) {
      // Each replica's gradient is its micro-batches' share of the batch's
      // mean (each weighted by its rows / the whole batch): the sum over the
      // replicas is the whole gradient, the same on both afterwards.
      reference::allreduce(dp, end.replica.grads(), ReduceOp::kSum);
      // Then the clipping norm over the pipeline's stages (each holds its
      // own units), and the loss over every rank (only last stages have one).
      std::array<double, 1> norm = {end.replica.local_sum_of_squares()};
      reference::allreduce(end.comm, norm, ReduceOp::kSum);
      std::array<double, 1> loss = {end.loss};
      reference::allreduce(all, loss, ReduceOp::kSum);
      end.replica.clip(norm[0]);
      end.replica.step(end.step);
      return loss[0];
    };
    Executor<double> executor(run, pp, replica, map, {}, hooks);
    const Schedule schedule = make_schedule(ScheduleKind::kOneFOneB, pp.size(), m);
    for (std::int64_t step = 0; step < spec.steps; ++step)
      run.record_loss(step, executor.step(schedule.actions[static_cast<std::size_t>(stage)], step, m));
    run.report(replica);
  });
}

DTW_TEST_STEPS(PipelineCompositionTest, "05.1", "05.2", "05.3");
TEST(PipelineCompositionTest, TwoDataParallelReplicasOfATwoStagePipelineMatchTheReference) {
  // m = 3 on a batch of 8: 6 shards of 2 and 1 rows, so the weights matter.
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int m : {1, 3}) {
      const train::RunSpec spec = tiny(model);
      const train::RunOutcome out = run_dp_pp(spec, m);
      const std::string what = std::string(model) + ", dp 2 × pp 2, m = " + std::to_string(m);
      EXPECT_TRUE(out.matches) << what << ": " << out.mismatch;
      for (const train::RankOutcome& r : out.ranks)
        EXPECT_EQ(r.losses.size(), static_cast<std::size_t>(spec.steps)) << what << ", rank " << r.rank;
      // Both replicas report their stages: the model twice over, and on a
      // GPT the head's copy of the tied wte twice more.
      const model::ModelConfig c = spec.config();
      const model::ParamLayout layout = model::param_layout(c);
      const bool tied = model::head_is_tied(c);
      EXPECT_EQ(out.compared, 2 * (layout.size() + (tied ? layout.find("wte").size : 0))) << what;
    }
}

DTW_TEST_STEPS(PipelineCommunicatorTest);
TEST(PipelineCommunicatorTest, AStageMapForAnotherCommunicatorIsRefused) {
  // The world of 4 given a map for a pipeline of 2 (mlp-tiny's 3 layers
  // cut by hand): every rank names both sizes.
  const train::RunSpec spec = tiny("mlp-tiny");
  const train::RunOutcome out = train::run_ranks<double>(spec, on(4), [&](train::RankRun<double>& run) {
    StageMap map;
    map.ranks = 2;
    map.chunks = {{0, 1}, {1, 3}};
    train::Replica<double> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
    const std::string message = testing::error_of<InvalidArgument>(
        [&] { Executor<double> executor(run, run.comm(), replica, map, {}); });
    EXPECT_NE(message.find("a stage map for 2 ranks in a world of 4"), std::string::npos) << message;
  });
  EXPECT_TRUE(out.report.errors.empty());
}

}  // namespace
}  // namespace dtw::ch05
