// Step 02.5: batches that do not divide by the world. Each shard weighs its
// rows over the batch; with that, every strategy matches the reference on 5
// ranks with 12 rows (3, 3, 2, 2, 2), for both models.
#include <gtest/gtest.h>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::tiny;

DTW_TEST_STEPS(ShardWeightTest, "02.5");
TEST(ShardWeightTest, WeightsAreRowsOverTheBatchAndSumToOne) {
  const train::RunSpec spec = tiny("gpt-tiny", 1, 12);
  DTW_TRACE("shard weights of a batch of 12 rows over 5 shards, then 4");
  const double want5[] = {3.0 / 12, 3.0 / 12, 2.0 / 12, 2.0 / 12, 2.0 / 12};
  double sum = 0;
  for (int r = 0; r < 5; ++r) {
    EXPECT_DOUBLE_EQ(shard_weight(spec, r, 5), want5[r]) << "rank " << r;
    sum += shard_weight(spec, r, 5);
  }
  EXPECT_DOUBLE_EQ(sum, 1.0);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(shard_weight(spec, r, 4), 0.25);
}

DTW_TEST_STEPS(ShardArgumentsTest);
TEST(ShardArgumentsTest, MoreShardsThanRowsIsAClearError) {
  testing::expect_error([&] { shard_weight(tiny("gpt-tiny", 1, 3), 0, 4); },
                        {"a global batch of 3 cannot be split over 4"});
}

DTW_TEST_STEPS(UnevenShardsTest, "02.1", "02.2", "02.3", "02.4", "02.5");
TEST(UnevenShardsTest, EveryStrategyMatchesTheReferenceOnFiveRanksWithTwelveRows) {
  const testing::Strategy strategies[] = {
      [](train::RankRun<double>& run) { dp_server(run); },
      [](train::RankRun<double>& run) { dp_allreduce(run); },
      [](train::RankRun<double>& run) { ddp_bucketed(run); },
  };
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (const testing::Strategy& s : strategies) expect_matches(tiny(model), 5, s);
}

TEST(UnevenShardsTest, AccumulationSplitsTheBatchIntoUnevenMicroBatches) {
  // 13 rows on 2 ranks × 3 micro-batches: shards of 3, 2, 2, 2, 2, 2 rows.
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    expect_matches(
        tiny(model, 5, 13), 2, [](train::RankRun<double>& run) { ddp_accumulate(run); },
        train::Knobs().set("micro_batches", "3"));
}

}  // namespace
}  // namespace dtw::ch02
