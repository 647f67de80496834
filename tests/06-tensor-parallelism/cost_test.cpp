// The chapter's cost model against the measurement: per step, the messages
// and bytes every rank sent (the traffic record) equal the formulas exactly,
// which count each collective: 4L + 5 allreduces for tp; 6L + 3 allgathers
// (the backward gathers each sublayer's and the head's input again), 4L + 2
// reduce-scatters and 4 allreduces for tp-sp. Per rank, the ledger's
// parameters, gradients and optimizer state equal the slice plus the
// replicated tensors, to the element, and its activations the chapter's
// derivation for each (tp-sp: the rank's tokens between the ends, the whole
// sequence inside the sublayers and the head, no gathered input kept), to
// the byte.
#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::on;
using testing::tiny;

void expect_costs(bool sp, int t) {
  const train::RunSpec spec = tiny(2);
  const model::ModelConfig c = spec.config();
  DTW_TRACE_RUN(spec, t, {});
  DTW_TRACE((sp ? "tp-sp" : "tp") << " costs");
  const train::RunOutcome out = train::run_ranks<double>(
      spec, on(t), sp ? [](train::RankRun<double>& run) { tensor_parallel_sp(run); }
                      : [](train::RankRun<double>& run) { tensor_parallel(run); });
  ASSERT_TRUE(out.matches) << out.mismatch;
  const std::int64_t e = 8;
  for (int r = 0; r < t; ++r) {
    std::int64_t bytes = 0, messages = 0;
    for (int q = 0; q < t; ++q) {
      bytes += out.report.traffic.bytes(r, q);
      messages += out.report.traffic.messages(r, q);
    }
    EXPECT_EQ(bytes, spec.steps * bytes_per_step(c, spec.batch, spec.sequence(), r, t, sp, e))
        << "rank " << r << " of " << t << ": bytes sent";
    EXPECT_EQ(messages, spec.steps * messages_per_step(c, t, sp))
        << "rank " << r << " of " << t << ": messages sent (collectives counted)";
    const std::int64_t psi = params_per_rank(c, r, t, true);
    model::ModelShard shard = megatron_shard(c, r, t);
    EXPECT_EQ(psi, model::param_layout(c, shard).size()) << "the formula against the layout";
    const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
    EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), psi * e) << "rank " << r << ": parameters";
    EXPECT_EQ(m.peak_of(MemoryCategory::kGradients), psi * e) << "rank " << r << ": gradients";
    EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), 2 * psi * e)
        << "rank " << r << ": AdamW's two moments";
    EXPECT_EQ(m.peak_of(MemoryCategory::kActivations),
              sp ? tp_sp_activation_bytes(c, spec.batch, spec.sequence(), r, t, e)
                 : tp_activation_bytes(c, spec.batch, spec.sequence(), r, t, e))
        << "rank " << r << " of " << t << ": activations";
  }
}

DTW_TEST_STEPS(CostTest, "06.1", "06.2", "06.5");
TEST(CostTest, TensorParallelSendsAndHoldsWhatTheFormulasSay) {
  for (int t : {1, 2, 4}) expect_costs(false, t);
}

DTW_TEST_STEPS(FormulaTest, "06.2", "06.5");
TEST(FormulaTest, TheCollectivesPerStepAreFourPerLayerPlusTheEndsAndTheNorm) {
  const model::ModelConfig c = tiny().config();
  const CollectiveCount k = collectives_per_step(c, false);
  EXPECT_EQ(k.allreduces, 4 * c.layers + 5);
  EXPECT_EQ(k.allgathers + k.reduce_scatters, 0);
  // Parameters per rank: 1/t of the sliced tensors plus the replicated ones.
  const std::int64_t whole = model::param_layout(c).size(), R = replicated_params(c, true);
  EXPECT_EQ(params_per_rank(c, 0, 4, true), (whole - R) / 4 + R);
}

DTW_TEST_STEPS(SequenceParallelCostTest, "06.2", "06.5", "06.6");
TEST(SequenceParallelCostTest, SequenceParallelSendsAndHoldsWhatTheFormulasSay) {
  for (int t : {1, 2, 4}) expect_costs(true, t);
}

}  // namespace
}  // namespace dtw::ch06
