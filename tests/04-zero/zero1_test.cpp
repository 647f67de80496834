// Step 04.1, ZeRO-1: the run matches the single-device reference in double
// on 1-5 ranks (5: the batch of 12 rows splits unevenly, and every unit into
// uneven chunks), for the GPT and the MLP, with and without micro-batches;
// the ledger's peaks are the formula exactly; the traffic matrix is the ring's.
#include <string>

#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::on;
using testing::tiny;

DTW_TEST_STEPS(Zero1Test, "04.1");
TEST(Zero1Test, OnlyTheOptimizerStateIsSharded) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    const train::RunSpec spec = tiny(model, 1);
    const int p = 4;
    DTW_TRACE("zero1 memory: optimizer state for this rank's shards only, " << model << " on "
                                                                           << p << " ranks");
    const train::RunOutcome out = testing::run_stage(1, spec, on(p));
    const std::int64_t psi = static_cast<std::int64_t>(testing::units_of(spec).back().end);
    for (int r = 0; r < p; ++r) {
      const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
      EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), 8 * psi) << model << " rank " << r;
      EXPECT_EQ(m.peak_of(MemoryCategory::kGradients), 8 * psi) << model << " rank " << r;
      // AdamW's two moments, for this rank's chunks of every unit only.
      EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), 2 * 8 * testing::owned(spec, p, r))
          << model << " rank " << r
          << ": ZeRO-1 keeps Adam's moments for this rank's shards only (the plan's optimizer "
             "ranges are Sharding::owned(r)); moments for the whole model is DDP's memory";
      EXPECT_EQ(m.peak_of(MemoryCategory::kCommBuffers), 0) << model << " rank " << r;
    }
  }
}

TEST(Zero1Test, MatchesTheReferenceOnOneToFiveRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p = 1; p <= 5; ++p) {
      const train::RunSpec spec = tiny(model);
      DTW_TRACE("zero1, " << ::dtw::testing::describe_run(spec, p));
      const train::RunOutcome out = testing::run_stage(1, spec, on(p));
      EXPECT_TRUE(out.matches) << testing::where(spec, p) << ": " << out.mismatch;
      EXPECT_EQ(out.losses.size(), 3u) << testing::where(spec, p);
    }
  }
}

TEST(Zero1Test, MicroBatchesAccumulateBeforeTheReduceScatter) {
  // 12 rows over 3 ranks x 2 micro-batches: six shards of two rows.
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const train::RunOutcome out = testing::run_stage(1, spec, on(3, {"micro_batches=2"}));
  EXPECT_TRUE(out.matches) << out.mismatch;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(testing::bytes_sent(out.report, r), 2 * testing::bytes_per_step(spec, 1, 3, r))
        << "rank " << r << ": one reduce-scatter per step, whatever m";
}

TEST(Zero1Test, SendsTheRingsBytesExactly) {
  // A reduce-scatter and an allgather per unit: DDP's 2Ψ(p−1)/p, counted
  // chunk by chunk (uneven chunks on 3 and 5 ranks).
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p : {2, 3, 5}) {
      const train::RunSpec spec = tiny(model, 1);
      const train::RunOutcome out = testing::run_stage(1, spec, on(p));
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(testing::bytes_sent(out.report, r), testing::bytes_per_step(spec, 1, p, r))
            << testing::where(spec, p) << ", rank " << r;
    }
  }
}

}  // namespace
}  // namespace dtw::ch04
