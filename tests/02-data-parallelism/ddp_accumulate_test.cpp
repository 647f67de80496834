// Step 02.4: gradient accumulation. The ranks' micro-batches tile the batch
// exactly as the reference sees it; DDP with m micro-batches per step matches
// the reference on 1-4 ranks for both models and communicates once per step
// (the bytes and messages of m = 1); bad micro-batch counts are clear errors.
#include <gtest/gtest.h>

#include <string>

#include "dp_test.h"
#include "dtw/train/micro_batches.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::model_size;
using testing::tiny;

void accumulate(train::RankRun<double>& run) {
  ddp_accumulate(run);
}

train::Knobs micro(std::int64_t m) {
  return train::Knobs().set("micro_batches", std::to_string(m)).set("bucket_kib", "16");
}

DTW_TEST_STEPS(MicroBatchShardsTest, "02.4");
TEST(MicroBatchShardsTest, TheRanksMicroBatchesTileTheBatchInOrder) {
  for (const std::int64_t batch : {12, 13}) {
    const train::RunSpec spec = tiny("gpt-tiny", 1, batch);
    for (int p = 1; p <= 4; ++p) {
      for (std::int64_t m = 1; m <= 3; ++m) {
        DTW_TRACE("micro-batch shards of a batch of " << batch << " rows on " << p
                                                     << " ranks, micro_batches=" << m);
        std::int64_t next_row = 0;
        for (int r = 0; r < p; ++r) {
          const std::vector<std::int64_t> shards = micro_batch_shards(spec, r, p, m);
          ASSERT_EQ(shards.size(), static_cast<std::size_t>(m)) << "p " << p << " m " << m;
          // The training layer's rule, which ZeRO and the pipelines use.
          for (int k = 0; k < static_cast<int>(m); ++k)
            EXPECT_EQ(shards[static_cast<std::size_t>(k)],
                      train::micro_batch_shard(r, p, k, static_cast<int>(m)).shard)
                << "p " << p << " m " << m << " rank " << r << " micro-batch " << k;
          for (const std::int64_t s : shards) {
            const train::ShardRows rows = train::shard_rows(spec, s, p * m);
            EXPECT_EQ(rows.begin, next_row)
                << "batch " << batch << " p " << p << " m " << m << " rank " << r << " shard " << s;
            next_row = rows.end;
          }
        }
        EXPECT_EQ(next_row, batch) << "batch " << batch << " p " << p << " m " << m;
      }
    }
  }
}

DTW_TEST_STEPS(MicroBatchArgumentsTest);
TEST(MicroBatchArgumentsTest, MoreMicroBatchesThanRowsIsAClearError) {
  const train::RunSpec spec = tiny("gpt-tiny", 1, 4);
  testing::expect_error(
      [&] { micro_batch_shards(spec, 1, 2, 3); },
      {"rank 1", "a global batch of 4 rows cannot feed 2 ranks x 3 micro-batches"});
  testing::expect_error([&] { micro_batch_shards(spec, 0, 2, 0); }, {"micro_batches=0"});
}

TEST(MicroBatchArgumentsTest, TheRunCheckRefusesWhatTheRanksWouldBeforeAnyRuns) {
  // check_ddp_run is what every rank checks first, and what the strategies'
  // registrations check before any rank runs (rank -1: no rank to name).
  const train::RunSpec spec = tiny("gpt-tiny", 1, 8);
  const std::string before = testing::expect_error(
      [&] { check_ddp_run(train::Knobs(), spec, 8, -1, true); },
      {"a global batch of 8 rows cannot feed 8 ranks x 4 micro-batches = 32"});
  EXPECT_EQ(before.rfind("a global batch", 0), 0u) << "names a rank before any runs: " << before;
  testing::expect_error([&] { check_ddp_run(micro(3), spec, 3, 2, true); },
                        {"rank 2: a global batch of 8 rows cannot feed 3 ranks x 3"});
  testing::expect_error([&] { check_ddp_run(train::Knobs(), spec, 9, -1, false); },
                        {"a global batch of 8 cannot be split over 9"});
  testing::expect_error(
      [&] { check_ddp_run(train::Knobs().set("bucket_kib", "0"), spec, 2, -1, false); },
      {"bucket_kib=0"});
  EXPECT_EQ(check_ddp_run(micro(2), spec, 4, -1, true).micro_batches, 2);
  // Without accumulation the micro-batches are not read: a row per rank is enough.
  EXPECT_NO_THROW(check_ddp_run(train::Knobs(), spec, 8, 0, false));
}

DTW_TEST_STEPS(DdpAccumulateTest, "02.2", "02.3", "02.4");
TEST(DdpAccumulateTest, MatchesTheReferenceOnOneToFourRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int p = 1; p <= 4; ++p) expect_matches(tiny(model), p, accumulate, micro(p == 4 ? 3 : 2));
}

TEST(DdpAccumulateTest, CommunicatesOncePerStepWhateverTheMicroBatches) {
  const train::RunSpec spec = tiny("mlp-tiny", 2);
  const int p = 2;
  std::int64_t bytes_m1 = 0, messages_m1 = 0;
  for (const std::int64_t m : {1, 3}) {
    DTW_TRACE("ddp-accumulate's traffic on 2 ranks, micro_batches=" << m
                                                                   << ": the bytes of one allreduce per step");
    train::Knobs knobs = micro(m);
    knobs.set("check_every", "0");
    const train::RunOutcome out = expect_matches(spec, p, accumulate, knobs);
    const std::int64_t messages = out.report.traffic.total_messages();
    if (m == 1) {
      bytes_m1 = out.report.total_bytes();
      messages_m1 = messages;
      EXPECT_EQ(bytes_m1, static_cast<std::int64_t>(sizeof(double)) *
                              ((p - 1) * model_size(spec) +
                               spec.steps * 2 * (p - 1) * (model_size(spec) + 1)));
    } else {
      EXPECT_EQ(out.report.total_bytes(), bytes_m1) << m << " micro-batches";
      EXPECT_EQ(messages, messages_m1) << m << " micro-batches";
    }
  }
}

DTW_TEST_STEPS(DdpAccumulateArgumentsTest);
TEST(DdpAccumulateArgumentsTest, BadMicroBatchCountsAreClearErrorsOnEveryRank) {
  testing::expect_error(
      [&] { train::run_ranks<double>(tiny("mlp-tiny", 1), testing::on(2, micro(0)), accumulate); },
      {"micro_batches=0", "at least one micro-batch"});
  testing::expect_error(
      [&] {
        train::run_ranks<double>(tiny("mlp-tiny", 1, 4), testing::on(2, micro(3)), accumulate);
      },
      {"cannot feed 2 ranks x 3 micro-batches = 6"});
}

}  // namespace
}  // namespace dtw::ch02
