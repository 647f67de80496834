// RunSpec: one set of defaults, validation naming the field, and shards of a
// batch that concatenate to the whole batch, even when it does not divide.
#include <gtest/gtest.h>

#include <string>

#include "dtw/errors.h"
#include "dtw/train/run_spec.h"

namespace dtw::train {
namespace {

TEST(RunSpecTest, TheStandardRunIsDtwTrainsRun) {
  const RunSpec s = standard_run("gpt-tiny");
  EXPECT_EQ(s.steps, 200);
  EXPECT_EQ(s.batch, 8);
  EXPECT_EQ(s.task, model::TokenTask::kCorpus);
  EXPECT_EQ(s.warmup_steps, 30);
  EXPECT_EQ(s.lr(), 3e-3);
  EXPECT_EQ(s.clip_norm, 1.0);
  EXPECT_EQ(s.seed, 1234u);
  EXPECT_EQ(s.dtype, DType::kFloat32);
  EXPECT_EQ(s.sequence(), 32);  // the context
  EXPECT_EQ(s.tokens_per_step(), 8 * 32);
  EXPECT_EQ(standard_run("mlp-tiny").tokens_per_step(), 8);
  const model::TrainOptions o = s.options();
  EXPECT_EQ(o.warmup_steps, 30);
  EXPECT_EQ(o.task, model::TokenTask::kCorpus);
  RunSpec sgd = s;
  sgd.optimizer = model::Optimizer::kSgd;
  sgd.set_lr(0.5);
  EXPECT_EQ(sgd.options().sgd.lr, 0.5);
  EXPECT_NE(s.describe(), sgd.describe());
}

TEST(RunSpecTest, BadFieldsAreNamed) {
  auto message = [](const RunSpec& s) {
    try {
      s.validate();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(valid)");
  };
  RunSpec s = standard_run("gpt-tiny");
  s.batch = 0;
  EXPECT_NE(message(s).find("batch 0"), std::string::npos);
  s = standard_run("gpt-tiny");
  s.seq_len = 40;
  EXPECT_NE(message(s).find("seq_len 40 is outside [0, context 32]"), std::string::npos);
  s = standard_run("gpt-tiny");
  s.clip_norm = -2;
  EXPECT_NE(message(s).find("clip_norm -2"), std::string::npos);
  EXPECT_THROW(standard_run("gpt-huge"), InvalidArgument);
  EXPECT_THROW(dtype_from_name("bf16"), InvalidArgument);
  EXPECT_EQ(dtype_from_name("double"), DType::kFloat64);
}

TEST(RunSpecTest, ShardsSplitTheBatchNearlyEvenly) {
  RunSpec s = standard_run("gpt-tiny");
  s.batch = 7;
  EXPECT_EQ(shard_rows(s, 0, 3).begin, 0);
  EXPECT_EQ(shard_rows(s, 0, 3).size(), 3);
  EXPECT_EQ(shard_rows(s, 1, 3).begin, 3);
  EXPECT_EQ(shard_rows(s, 2, 3).end, 7);
  EXPECT_THROW(shard_rows(s, 3, 3), InvalidArgument);
  EXPECT_THROW(shard_rows(s, 0, 8), InvalidArgument);  // more shards than rows
  try {
    require_even_split(s, 3, "ddp");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ddp: the global batch of 7 does not split evenly over 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(RunSpecTest, ShardsConcatenateToTheWholeBatch) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    RunSpec s = standard_run(model);
    s.batch = 7;
    const Batch whole = make_batch(s, 4);
    for (int shards : {1, 2, 3, 7}) {
      Batch joined;
      double weight = 0;
      for (int r = 0; r < shards; ++r) {
        const Batch b = make_batch(s, 4, r, shards);
        joined.tokens.insert(joined.tokens.end(), b.tokens.begin(), b.tokens.end());
        joined.targets.insert(joined.targets.end(), b.targets.begin(), b.targets.end());
        joined.inputs.insert(joined.inputs.end(), b.inputs.begin(), b.inputs.end());
        joined.labels.insert(joined.labels.end(), b.labels.begin(), b.labels.end());
        weight += b.weight;
      }
      EXPECT_EQ(joined.tokens, whole.tokens) << model << " " << shards;
      EXPECT_EQ(joined.targets, whole.targets);
      EXPECT_EQ(joined.inputs, whole.inputs);
      EXPECT_EQ(joined.labels, whole.labels);
      EXPECT_DOUBLE_EQ(weight, 1.0);
    }
  }
}

}  // namespace
}  // namespace dtw::train
