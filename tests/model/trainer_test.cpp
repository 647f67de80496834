// The reference trainer: the loss falls, runs are bitwise reproducible, the
// optimiser step splits into shards exactly, bad options are named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/trainer.h"
#include "dtw_test.h"

namespace dtw::model {
namespace {

TEST(TrainerTest, GptTinyLossFallsOnTheSyntheticTask) {
  std::vector<StepInfo> infos;
  TrainOptions o;
  o.on_step = [&](const StepInfo& s) { infos.push_back(s); };
  const TrainResult<float> r = train_reference<float>(model_config("gpt-tiny"), 20, o);
  ASSERT_EQ(r.losses.size(), 20u);
  // Untrained, the tied head's logits are tiny: the loss starts at ≈ ln(vocab).
  EXPECT_NEAR(r.losses.front(), std::log(96.0), 0.1);
  EXPECT_LT(r.losses.back(), 0.7 * r.losses.front());
  ASSERT_EQ(infos.size(), 20u);
  for (std::int64_t s = 0; s < 20; ++s) {
    EXPECT_EQ(infos[s].step, s);
    EXPECT_EQ(infos[s].loss, r.losses[s]);
    EXPECT_EQ(infos[s].tokens, 8 * 32);  // default batch 8 × the context
    EXPECT_GT(infos[s].grad_norm, 0.0);
    EXPECT_GE(infos[s].seconds, 0.0);
  }
}

// Mean of losses [begin, begin + 5): single steps of a small batch are noisy.
double mean5(const std::vector<double>& losses, std::size_t begin) {
  double sum = 0;
  for (std::size_t i = begin; i < begin + 5; ++i) sum += losses[i];
  return sum / 5;
}

TEST(TrainerTest, MlpTinyLossFallsWithEitherOptimizer) {
  TrainOptions o;
  o.batch = 32;
  o.adamw.lr = 1e-2;
  const TrainResult<float> a = train_reference<float>(model_config("mlp-tiny"), 40, o);
  EXPECT_NEAR(a.losses.front(), std::log(8.0), 0.5);  // N(0, 1/fan_in) init: logits O(1)
  EXPECT_LT(mean5(a.losses, 35), 0.7 * mean5(a.losses, 0));
  o.optimizer = Optimizer::kSgd;
  const TrainResult<float> s = train_reference<float>(model_config("mlp-tiny"), 30, o);
  EXPECT_LT(mean5(s.losses, 25), 0.7 * mean5(s.losses, 0));
}

template <class T>
void expect_bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0)
      << testing::compare<T>(0, a, b);
}

TEST(TrainerTest, SameOptionsGiveBitwiseTheSameRun) {
  TrainOptions o;
  o.batch = 3;
  o.seq_len = 7;
  o.task = TokenTask::kCorpus;
  for (Optimizer opt : {Optimizer::kAdamW, Optimizer::kSgd}) {
    o.optimizer = opt;
    const auto a = train_reference<float>(model_config("gpt-tiny"), 3, o);
    const auto b = train_reference<float>(model_config("gpt-tiny"), 3, o);
    expect_bitwise_equal(a.params, b.params);
    expect_bitwise_equal(a.losses, b.losses);
    const auto c = train_reference<double>(model_config("mlp-tiny"), 4, o);
    const auto d = train_reference<double>(model_config("mlp-tiny"), 4, o);
    expect_bitwise_equal(c.params, d.params);
  }
  // And the seed matters.
  TrainOptions other = o;
  other.seed = 99;
  EXPECT_NE(train_reference<float>(model_config("mlp-tiny"), 1, o).losses,
            train_reference<float>(model_config("mlp-tiny"), 1, other).losses);
}

// A ZeRO rank steps only its shard; the shards' steps must be the whole step.
TEST(TrainerTest, OptimizerStepOnShardsEqualsTheWholeStep) {
  const ModelConfig c = model_config("gpt-tiny");
  const ParamLayout layout = param_layout(c);
  const std::int64_t n = layout.size();
  std::vector<float> params(n), grads(n);
  init_params(c, layout, 4, params.data());
  for (std::int64_t i = 0; i < n; ++i)
    grads[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  for (Optimizer opt : {Optimizer::kAdamW, Optimizer::kSgd}) {
    TrainOptions o;
    o.optimizer = opt;
    std::vector<float> whole = params, m(n), v(n);
    for (std::int64_t step = 1; step <= 2; ++step)
      optimizer_step(layout, o, step, 0, n, whole.data(), grads.data(), m.data(), v.data());
    // Cut points inside views (not on their boundaries), and an empty shard.
    std::vector<float> sharded = params, ms(n), vs(n);
    const std::int64_t cuts[] = {0, 1000, 1000, 31337, n};
    for (std::int64_t step = 1; step <= 2; ++step)
      for (int s = 0; s + 1 < 5; ++s) {
        const std::int64_t b = cuts[s], e = cuts[s + 1];
        std::vector<float> p(sharded.begin() + b, sharded.begin() + e);
        optimizer_step(layout, o, step, b, e, p.data(), grads.data() + b, ms.data() + b,
                       vs.data() + b);
        std::copy(p.begin(), p.end(), sharded.begin() + b);
      }
    expect_bitwise_equal(whole, sharded);
  }
}

TEST(TrainerTest, WeightDecayOnlyTouchesMatrices) {
  const ModelConfig c = model_config("gpt-tiny");
  const ParamLayout layout = param_layout(c);
  const std::int64_t n = layout.size();
  std::vector<float> params(n), zeros(n), m(n), v(n);
  init_params(c, layout, 4, params.data());
  const std::vector<float> before = params;
  TrainOptions o;
  o.adamw.weight_decay = 0.5;
  optimizer_step(layout, o, 1, 0, n, params.data(), zeros.data(), m.data(), v.data());
  for (const ParamView& view : layout.views()) {
    const std::int64_t i = view.offset;  // first element of each view
    if (view.decay && before[i] != 0)
      EXPECT_NE(params[i], before[i]) << view.name << " should decay";
    else EXPECT_EQ(params[i], before[i]) << view.name << " should not decay";
  }
}

TEST(TrainerTest, WarmupGrowsTheLearningRateLinearly) {
  TrainOptions o;
  EXPECT_EQ(learning_rate_scale(o, 1), 1.0);  // no warm-up: the full rate at once
  o.warmup_steps = 4;
  EXPECT_EQ(learning_rate_scale(o, 1), 0.25);
  EXPECT_EQ(learning_rate_scale(o, 3), 0.75);
  EXPECT_EQ(learning_rate_scale(o, 4), 1.0);
  EXPECT_EQ(learning_rate_scale(o, 100), 1.0);
  // One SGD step without momentum moves p by exactly lr_scale·lr·g: with
  // warm-up over 4 steps the first step is a quarter of the plain one.
  const ModelConfig mlp = model_config("mlp-tiny");
  const ParamLayout layout = param_layout(mlp);
  o.optimizer = Optimizer::kSgd;
  o.sgd = {/*lr*/ 0.5, /*momentum*/ 0.0, /*weight_decay*/ 0.0};
  std::vector<double> p(static_cast<std::size_t>(layout.size()), 1.0), g(p.size(), 2.0);
  std::vector<double> m(p.size(), 0.0);
  optimizer_step<double>(layout, o, 1, 0, layout.size(), p.data(), g.data(), m.data(), nullptr);
  for (double x : p) ASSERT_EQ(x, 1.0 - 0.25 * 0.5 * 2.0);
  o.warmup_steps = 0;
  std::fill(p.begin(), p.end(), 1.0);
  optimizer_step<double>(layout, o, 1, 0, layout.size(), p.data(), g.data(), m.data(), nullptr);
  for (double x : p) ASSERT_EQ(x, 1.0 - 0.5 * 2.0);
}

TEST(TrainerTest, BadOptionsRaiseInvalidArgumentNamingTheValues) {
  auto message = [](const ModelConfig& c, std::int64_t steps, const TrainOptions& o) {
    try {
      train_reference<float>(c, steps, o);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(no InvalidArgument)");
  };
  const ModelConfig gpt = model_config("gpt-tiny");
  TrainOptions o;
  o.batch = 0;
  EXPECT_NE(message(gpt, 1, o).find("batch 0"), std::string::npos);
  o = {};
  o.seq_len = 33;
  EXPECT_NE(message(gpt, 1, o).find("seq_len 33 is outside [0, context 32]"), std::string::npos);
  o = {};
  EXPECT_NE(message(gpt, -1, o).find("steps -1"), std::string::npos);
  o.clip_norm = -1;
  EXPECT_NE(message(gpt, 1, o).find("clip_norm -1"), std::string::npos);
  o = {};
  o.warmup_steps = -3;
  EXPECT_NE(message(gpt, 1, o).find("warmup_steps -3"), std::string::npos);
  ModelConfig broken = gpt;
  broken.dim = 30;
  EXPECT_NE(message(broken, 1, {}).find("dim 30"), std::string::npos);
  EXPECT_THROW(
      optimizer_step<float>(param_layout(gpt), {}, 1, 5, 4, nullptr, nullptr, nullptr, nullptr),
      InvalidArgument);
}

}  // namespace
}  // namespace dtw::model
