// RunSpec: one set of defaults, validation naming the field, and shards of a
// batch that concatenate to the whole batch, even when it does not divide.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/gpt.h"
#include "dtw/model/mlp.h"
#include "dtw/model/params.h"
#include "dtw/train/run_spec.h"

namespace dtw::train {
namespace {

TEST(RunSpecTest, TheStandardRunIsDtwTrainsRun) {
  const RunSpec s = standard_run("gpt-tiny");
  EXPECT_EQ(s.steps, 200);
  EXPECT_EQ(s.batch, 8);
  EXPECT_FALSE(s.task);  // corpus, as the options say
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

// Every hyper-parameter in force is checked: NaN and infinity fail every
// range (a NaN learning rate used to pass through a CLI that kept the default
// unless lr > 0), and so do enums cast from integers outside their range.
TEST(RunSpecTest, EveryHyperParameterInForceIsValidated) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::string, std::function<void(RunSpec&)>>> cases{
      {"learning rate -1", [](RunSpec& s) { s.set_lr(-1); }},
      {"learning rate nan", [&](RunSpec& s) { s.set_lr(nan); }},
      {"learning rate inf", [&](RunSpec& s) { s.set_lr(inf); }},
      {"learning rate 0", [](RunSpec& s) { s.set_lr(0); }},
      {"adamw beta1 1 must be in [0, 1)", [](RunSpec& s) { s.adamw.beta1 = 1; }},
      {"adamw beta2 nan", [&](RunSpec& s) { s.adamw.beta2 = nan; }},
      {"adamw eps 0", [](RunSpec& s) { s.adamw.eps = 0; }},
      {"adamw weight_decay -0.1", [](RunSpec& s) { s.adamw.weight_decay = -0.1; }},
      {"sgd momentum 1.5",
       [](RunSpec& s) {
         s.optimizer = model::Optimizer::kSgd;
         s.sgd.momentum = 1.5;
       }},
      {"sgd weight_decay nan",
       [&](RunSpec& s) {
         s.optimizer = model::Optimizer::kSgd;
         s.sgd.weight_decay = nan;
       }},
      {"clip_norm nan", [&](RunSpec& s) { s.clip_norm = nan; }},
      {"warmup_steps -1", [](RunSpec& s) { s.warmup_steps = -1; }},
      {"steps -1", [](RunSpec& s) { s.steps = -1; }},
      {"optimizer 7", [](RunSpec& s) { s.optimizer = static_cast<model::Optimizer>(7); }},
      {"task 9", [](RunSpec& s) { s.task = static_cast<model::TokenTask>(9); }},
      {"dtype 3", [](RunSpec& s) { s.dtype = static_cast<DType>(3); }},
  };
  for (const auto& [expected, change] : cases) {
    RunSpec s = standard_run("gpt-tiny");
    change(s);
    try {
      s.validate();
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  // The optimizer not in force is not checked: its fields are unused.
  RunSpec s = standard_run("gpt-tiny");
  s.sgd.momentum = nan;
  EXPECT_NO_THROW(s.validate());
}

TEST(RunSpecTest, HyperParametersNameEveryOneInForce) {
  RunSpec s = standard_run("gpt-tiny");
  s.set_lr(0.0125);
  const std::string adamw = s.hyperparameters();
  for (const char* part : {"gpt-tiny", "200 steps", "batch 8 x 32 tokens", "corpus text",
                           "adamw lr 0.0125", "beta1 0.9", "beta2 0.95", "eps 1e-08",
                           "weight decay 0.1", "warm-up 30 steps", "clip 1", "seed 1234",
                           "float32"})
    EXPECT_NE(adamw.find(part), std::string::npos) << part << " missing from: " << adamw;
  s.optimizer = model::Optimizer::kSgd;
  s.clip_norm = 0;
  const std::string sgd = s.hyperparameters();
  for (const char* part : {"sgd lr 0.1", "momentum 0.9", "clip 0 (none)"})
    EXPECT_NE(sgd.find(part), std::string::npos) << part << " missing from: " << sgd;
  EXPECT_EQ(sgd.find("beta1"), std::string::npos) << sgd;
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

// The memory a rank is declared to hold (LaunchOptions::bytes_per_rank) is
// five copies of the parameters and twice the activations the model itself
// says its forward keeps for the rank's shard (Gpt/Mlp::activation_bytes):
// the two counts cannot drift apart.
TEST(RunSpecTest, ARanksBytesAreItsModelAndItsShardsActivations) {
  for (const char* name : {"mlp-tiny", "gpt-tiny"}) {
    RunSpec spec = standard_run(name);
    spec.batch = 12;
    const model::ModelConfig c = spec.config();
    const auto params = static_cast<std::int64_t>(model::param_layout(c).size());
    const auto activations = [&](std::int64_t rows) -> std::int64_t {
      if (c.kind == model::ModelKind::kGpt) {
        const model::Gpt<float> gpt(c);
        const int units = static_cast<int>(gpt.units().size());
        return gpt.activation_bytes({0, units}, rows, spec.sequence());
      }
      const model::Mlp<float> mlp(c);
      return mlp.activation_bytes({0, static_cast<int>(mlp.units().size())}, rows);
    };
    EXPECT_EQ(rank_bytes_estimate(spec, 1), 4 * 5 * params + 2 * activations(12)) << name;
    // 12 rows on 5 ranks: the largest shard has 3.
    EXPECT_EQ(rank_bytes_estimate(spec, 5), 4 * 5 * params + 2 * activations(3)) << name;
    spec.dtype = DType::kFloat64;
    EXPECT_GT(rank_bytes_estimate(spec, 1), 4 * 5 * params + 2 * activations(12)) << name;
  }
  // A batch no machine holds saturates instead of overflowing.
  RunSpec huge = standard_run("gpt-tiny");
  huge.batch = std::numeric_limits<std::int64_t>::max() / 2;
  EXPECT_EQ(rank_bytes_estimate(huge, 1), std::numeric_limits<std::int64_t>::max());
  EXPECT_THROW(rank_bytes_estimate(huge, 0), InvalidArgument);
}

}  // namespace
}  // namespace dtw::train
