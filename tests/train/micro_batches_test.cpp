// The micro-batch rule (micro_batches.h): data-parallel rank r's k-th of m
// micro-batches is shard r·m + k of dp·m, so the micro-batches of every rank,
// rank by rank and in order, are the whole batch; a rank's m micro-batches
// are its data-parallel shard; bad ranks and micro-batches are refused.
#include <gtest/gtest.h>

#include <string>

#include "dtw/errors.h"
#include "dtw/train/micro_batches.h"

namespace dtw::train {
namespace {

void append(Batch& to, const Batch& b) {
  to.tokens.insert(to.tokens.end(), b.tokens.begin(), b.tokens.end());
  to.targets.insert(to.targets.end(), b.targets.begin(), b.targets.end());
  to.inputs.insert(to.inputs.end(), b.inputs.begin(), b.inputs.end());
  to.labels.insert(to.labels.end(), b.labels.begin(), b.labels.end());
  to.rows += b.rows;
  to.weight += b.weight;
}

void expect_same_rows(const Batch& got, const Batch& want, const std::string& what) {
  EXPECT_EQ(got.rows, want.rows) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.targets, want.targets) << what;
  EXPECT_EQ(got.inputs, want.inputs) << what;
  EXPECT_EQ(got.labels, want.labels) << what;
}

TEST(MicroBatchesTest, ShardIsRankTimesMPlusK) {
  const MicroBatchShard s = micro_batch_shard(2, 3, 1, 4);
  EXPECT_EQ(s.shard, 9);
  EXPECT_EQ(s.shards, 12);
  EXPECT_EQ(micro_batch_shard(0, 1, 0, 1).shards, 1);
}

TEST(MicroBatchesTest, EveryRanksMicroBatchesInOrderAreTheWholeBatch) {
  // A batch of 7 (divides by nothing but 1 and 7) and of 12.
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (std::int64_t rows : {7, 12}) {
      RunSpec spec = standard_run(model);
      spec.batch = rows;
      const Batch whole = make_batch(spec, 3);
      for (int dp : {1, 2, 3})
        for (int m : {1, 2, 3}) {
          if (dp * m > rows) continue;
          const std::string what = std::string(model) + ", batch " + std::to_string(rows) +
                                   ", dp " + std::to_string(dp) + ", m " + std::to_string(m);
          Batch joined;
          joined.weight = 0;
          for (int r = 0; r < dp; ++r) {
            Batch mine;
            mine.weight = 0;
            for (int k = 0; k < m; ++k) append(mine, micro_batch(spec, 3, r, dp, k, m));
            // Where the batch divides, rank r's micro-batches are its shard of dp.
            if (rows % (dp * m) == 0) expect_same_rows(mine, make_batch(spec, 3, r, dp), what);
            append(joined, mine);
          }
          expect_same_rows(joined, whole, what);
          EXPECT_NEAR(joined.weight, 1.0, 1e-15) << what;
        }
    }
}

TEST(MicroBatchesTest, ARankOrMicroBatchOutsideTheGroupIsRefusedNamingIt) {
  auto message = [](auto fn) -> std::string {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([] { micro_batch_shard(2, 2, 0, 1); })
                .find("rank 2 is outside a data-parallel group of 2"),
            std::string::npos);
  EXPECT_NE(message([] { micro_batch_shard(1, 2, 3, 3); })
                .find("rank 1: micro-batch 3 is outside [0, 3)"),
            std::string::npos);
  EXPECT_NE(message([] { micro_batch_shard(0, 1, 0, 0); }).find("outside [0, 0)"),
            std::string::npos);
}

}  // namespace
}  // namespace dtw::train
