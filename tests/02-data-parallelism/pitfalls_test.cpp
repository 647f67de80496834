// The pitfalls from the field (pitfalls.cpp), each caught with a message that
// names what went wrong: the accumulation bugs and the skipped broadcast by
// the replicas' fingerprints, the 1/p average by the reference.
#include <gtest/gtest.h>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::tiny;

train::Knobs micro(std::int64_t m) {
  return train::Knobs().set("micro_batches", std::to_string(m)).set("bucket_kib", "16");
}

DTW_TEST_STEPS(SkipBroadcastPitfallTest, "02.2");
TEST(SkipBroadcastPitfallTest, CaughtAtTheFirstFingerprint) {
  testing::expect_error(
      [&] {
        train::run_ranks<double>(
            tiny("gpt-tiny", 2, 12), testing::on(3),
            [](train::RankRun<double>& run) { pitfalls::skip_initial_broadcast(run); });
      },
      {"replicas diverged at the start: rank 1's wte differs from rank 0's"});
}

DTW_TEST_STEPS(AccumulationPitfallTest, "02.2", "02.3", "02.4");
TEST(AccumulationPitfallTest, SyncingTheFirstMicroBatchIsCaughtAfterTheFirstStep) {
  testing::expect_error(
      [&] {
        train::run_ranks<double>(
            tiny("gpt-tiny", 2, 8), testing::on(2, micro(2)),
            [](train::RankRun<double>& run) { pitfalls::sync_on_first_micro_batch(run); });
      },
      {"replicas diverged after 1 step: rank 1's"});
}

TEST(AccumulationPitfallTest, ASyncFlagSetAfterTheForwardIsCaughtAfterTheFirstStep) {
  testing::expect_error(
      [&] {
        train::run_ranks<double>(
            tiny("mlp-tiny", 2, 8), testing::on(2, micro(2)),
            [](train::RankRun<double>& run) { pitfalls::sync_flag_set_after_forward(run); });
      },
      {"replicas diverged after 1 step: rank 1's"});
}

DTW_TEST_STEPS(AverageByWorldSizePitfallTest, "02.2");
TEST(AverageByWorldSizePitfallTest, TheReplicasAgreeButTheReferenceDoesNot) {
  // 13 rows on 3 ranks (5, 4, 4): every replica equal, every replica wrong.
  const train::RunOutcome out = train::run_ranks<double>(
      tiny("gpt-tiny", 2, 13), testing::on(3),
      [](train::RankRun<double>& run) { pitfalls::average_by_world_size(run); });
  EXPECT_FALSE(out.matches);
  EXPECT_NE(out.mismatch.find("relative error"), std::string::npos) << out.mismatch;
  // ... and with a batch that divides, 1/p is right.
  const train::RunOutcome even = train::run_ranks<double>(
      tiny("gpt-tiny", 2, 12), testing::on(3),
      [](train::RankRun<double>& run) { pitfalls::average_by_world_size(run); });
  EXPECT_TRUE(even.matches) << even.mismatch;
}

}  // namespace
}  // namespace dtw::ch02
