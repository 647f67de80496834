// The whole GPT: its gradient of every parameter against finite differences,
// gradient accumulation, float against double, rank threads, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/gpt.h"
#include "dtw_test.h"
#include "gradcheck.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::cptr;

TEST(GptTest, GradientOfEveryParameterMatchesFiniteDifferences) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);
    // seq 4 < context 5 leaves a position unused: its gradient must be exactly 0.
    for (auto [batch, seq] : {std::pair<std::int64_t, std::int64_t>{2, 5}, {1, 4}, {3, 1}}) {
      Gpt<double> model(c);
      std::vector<double> p = testing::random_params(model.layout(), 31);
      const auto tokens = testing::random_tokens(batch * seq, c.vocab, 32);
      const auto targets = testing::random_tokens(batch * seq, c.vocab, 33);
      model.forward(cptr(p), tokens.data(), targets.data(), batch, seq);
      std::vector<double> grads(p.size(), 0.0);
      model.backward(cptr(p), grads.data());
      Gpt<double> probe(c);
      const auto numeric = testing::numeric_gradient(
          p, [&] { return probe.forward(cptr(p), tokens.data(), targets.data(), batch, seq); });
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + ", batch " + std::to_string(batch) +
                   ", seq " + std::to_string(seq));
      EXPECT_TRUE(testing::gradients_match("gpt dparams", grads, numeric));
    }
  }
}

TEST(GptTest, BackwardAccumulatesScaledGradients) {
  const ModelConfig c = testing::gradcheck_gpt();
  Gpt<double> model(c);
  const std::vector<double> p = testing::random_params(model.layout(), 34);
  const auto tokens = testing::random_tokens(10, c.vocab, 35);
  model.forward(cptr(p), tokens.data(), tokens.data(), 2, 5);
  std::vector<double> once(p.size(), 0.0), halves(p.size(), 0.0);
  model.backward(cptr(p), once.data());
  model.backward(cptr(p), halves.data(), 0.5);
  model.backward(cptr(p), halves.data(), 0.5);
  // Halving is exact in binary, so the halves differ from the whole only by
  // the order in which accumulating products round: a few ulps (1e-13 ≫ 1e-16).
  for (std::size_t i = 0; i < p.size(); ++i)
    ASSERT_NEAR(once[i], halves[i], 1e-13 * std::max(1.0, std::abs(once[i]))) << "index " << i;
}

// The same parameters (rounded to float) and batch in both precisions.
TEST(GptTest, FloatModelMatchesDoubleModel) {
  const ModelConfig c = model_config("gpt-tiny");
  const ParamLayout layout = param_layout(c);
  std::vector<double> pd(layout.size());
  init_params(c, layout, 7, pd.data());
  const std::vector<float> pf(pd.begin(), pd.end());
  const std::vector<double> pr(pf.begin(), pf.end());  // exactly the float values
  const std::int64_t batch = 4, seq = c.context;
  const auto tokens = testing::random_tokens(batch * seq, c.vocab, 36);
  const auto targets = testing::random_tokens(batch * seq, c.vocab, 37);
  Gpt<double> md(c);
  Gpt<float> mf(c);
  const double ld = md.forward(cptr(pr), tokens.data(), targets.data(), batch, seq);
  const double lf = mf.forward(cptr(pf), tokens.data(), targets.data(), batch, seq);
  // Float rounds each of the ~20 kernel outputs on the path to the loss with
  // relative error ≲ √K·u (K ≤ 256-term sums, u = 6e-8: 1e-6 each, 2e-5 in all,
  // typical); 1e-4 leaves a factor of 5 and still catches any real bug, which
  // shows up at the 1e-2 level.
  EXPECT_NEAR(lf, ld, 1e-4 * ld);
  std::vector<double> gd(pr.size(), 0.0);
  std::vector<float> gf(pf.size(), 0.0f);
  md.backward(cptr(pr), gd.data());
  mf.backward(cptr(pf), gf.data());
  // The gradient as a whole (its norm of the difference) agrees to the same
  // order; single elements near zero can differ relatively more.
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < gd.size(); ++i) {
    diff += (gd[i] - gf[i]) * (gd[i] - gf[i]);
    norm += gd[i] * gd[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-4);
}

// Kernels called from many rank threads at once: each thread runs its own Gpt
// on the shared parameters and must get bitwise the single thread's gradient.
TEST(GptTest, RankThreadsGetBitwiseTheSameGradients) {
  const ModelConfig c = model_config("gpt-tiny");
  const ParamLayout layout = param_layout(c);
  std::vector<float> params(layout.size());
  init_params(c, layout, 8, params.data());
#ifdef DTW_TSAN
  const std::int64_t batch = 1, seq = 8;  // ThreadSanitizer slows every access ~10×
#else
  const std::int64_t batch = 4, seq = c.context;
#endif
  const auto tokens = testing::random_tokens(batch * seq, c.vocab, 38);
  const auto targets = testing::random_tokens(batch * seq, c.vocab, 39);
  auto run = [&](std::vector<float>& grads, float& loss) {
    Gpt<float> model(c);
    loss = model.forward(cptr(params), tokens.data(), targets.data(), batch, seq);
    grads.assign(params.size(), 0.0f);
    model.backward(cptr(params), grads.data());
  };
  std::vector<float> want;
  float want_loss = 0;
  run(want, want_loss);
  constexpr int kThreads = 8;
  std::vector<std::vector<float>> got(kThreads);
  std::vector<float> losses(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { run(got[t], losses[t]); });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(std::memcmp(&losses[t], &want_loss, sizeof(float)), 0) << "thread " << t;
    DTW_EXPECT_SAME(t, want, got[t]);
  }
}

TEST(GptTest, InferenceWithoutTargetsGivesLogitsButNoBackward) {
  const ModelConfig c = testing::gradcheck_gpt();
  Gpt<double> model(c);
  const std::vector<double> p = testing::random_params(model.layout(), 40);
  const auto tokens = testing::random_tokens(6, c.vocab, 41);
  EXPECT_EQ(model.forward(cptr(p), tokens.data(), nullptr, 2, 3), 0.0);
  EXPECT_EQ(model.logits().size(), static_cast<std::size_t>(6 * c.vocab));
  std::vector<double> g(p.size());
  EXPECT_THROW(model.backward(cptr(p), g.data()), InvalidArgument);
}

// The error names the offending values.
template <class F>
void expect_invalid(F f, const std::vector<std::string>& mentions) {
  try {
    f();
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    for (const std::string& m : mentions)
      EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what() << " lacks " << m;
  }
}

TEST(GptTest, BadInputRaisesInvalidArgumentNamingTheValues) {
  const ModelConfig c = testing::gradcheck_gpt();  // context 5, vocab 11
  Gpt<double> model(c);
  const std::vector<double> p = testing::random_params(model.layout(), 42);
  std::vector<std::int32_t> tokens(12, 1);
  expect_invalid([&] { model.forward(cptr(p), tokens.data(), tokens.data(), 2, 6); },
                 {"seq_len 6", "context 5"});
  expect_invalid([&] { model.forward(cptr(p), tokens.data(), tokens.data(), 0, 3); }, {"batch 0"});
  tokens[4] = 11;
  expect_invalid([&] { model.forward(cptr(p), tokens.data(), nullptr, 2, 3); },
                 {"token id 11", "vocab 11"});
  tokens[4] = 1;
  std::vector<std::int32_t> targets(6, 3);
  targets[5] = -1;
  expect_invalid([&] { model.forward(cptr(p), tokens.data(), targets.data(), 2, 3); },
                 {"target id -1"});
  std::vector<double> g(p.size());
  Gpt<double> fresh(c);
  expect_invalid([&] { fresh.backward(cptr(p), g.data()); }, {"no completed forward"});
  expect_invalid([] { Gpt<float> mlp(model_config("mlp-tiny")); }, {"mlp-tiny", "not a gpt"});
}

}  // namespace
}  // namespace dtw::model
