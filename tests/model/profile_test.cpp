// LayerTimes bookkeeping, and the model recording every kind of layer with
// the matmul work it is known to do.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "dtw/model/gpt.h"
#include "dtw/model/profile.h"
#include "dtw/model/trainer.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

TEST(LayerTimesTest, SumsPerKindAndSortsByTime) {
  LayerTimes t;
  EXPECT_TRUE(t.entries().empty());
  EXPECT_EQ(t.total_seconds(), 0.0);
  t.add("gelu", 0.5);
  t.add("matmul", 1.0, 100);
  t.add("matmul", 2.0, 50);
  const auto e = t.entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].kind, "matmul");
  EXPECT_EQ(e[0].seconds, 3.0);
  EXPECT_EQ(e[0].flops, 150.0);
  EXPECT_EQ(e[0].calls, 2);
  EXPECT_EQ(e[1].kind, "gelu");
  EXPECT_EQ(t.total_seconds(), 3.5);
  EXPECT_EQ(t.seconds("gelu"), 0.5);
  EXPECT_EQ(t.seconds("attention"), 0.0);
  t.clear();
  EXPECT_TRUE(t.entries().empty());
}

TEST(LayerTimesTest, ScopedTimerRecordsOneCallOrNothingWithoutTimes) {
  { ScopedLayerTimer nothing(nullptr, "matmul", 5); }  // must not crash
  LayerTimes t;
  { ScopedLayerTimer timer(&t, "bias", 7); }
  const auto e = t.entries();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, "bias");
  EXPECT_EQ(e[0].calls, 1);
  EXPECT_EQ(e[0].flops, 7.0);
  EXPECT_GE(e[0].seconds, 0.0);
}

TEST(LayerTimesTest, GptRecordsEveryKindAndItsMatmulWork) {
  const ModelConfig c = testing::gradcheck_gpt(false);
  Gpt<double> model(c);
  LayerTimes times;
  model.set_times(&times);
  const std::vector<double> p = testing::random_params(model.layout(), 61);
  const std::int64_t batch = 2, seq = 3, N = batch * seq;
  const auto tokens = testing::random_tokens(N, c.vocab, 62);
  model.forward(p.data(), tokens.data(), tokens.data(), batch, seq);
  std::vector<double> g(p.size());
  model.backward(p.data(), g.data());
  std::set<std::string> kinds;
  for (const auto& e : times.entries()) kinds.insert(e.kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"matmul", "attention", "layernorm", "gelu", "bias",
                                          "embedding", "residual", "loss"}));
  // Forward: 2·N·(weights of every linear layer); backward does twice that (dx and dW).
  const double C = static_cast<double>(c.dim), F = static_cast<double>(c.mlp_hidden);
  const double weights =
      static_cast<double>(c.layers) * (4 * C * C + 2 * F * C) + static_cast<double>(c.vocab) * C;
  double matmul_flops = 0;
  for (const auto& e : times.entries())
    if (e.kind == "matmul") matmul_flops = e.flops;
  EXPECT_DOUBLE_EQ(matmul_flops, 3 * 2 * static_cast<double>(N) * weights);
}

TEST(LayerTimesTest, TrainerAddsTheOptimizer) {
  LayerTimes times;
  TrainOptions o;
  o.times = &times;
  train_reference<float>(model_config("mlp-tiny"), 2, o);
  EXPECT_GT(times.seconds("optimizer"), 0.0);
  EXPECT_GT(times.seconds("matmul"), 0.0);
  EXPECT_GT(times.seconds("loss"), 0.0);
}

}  // namespace
}  // namespace dtw::model
