// The MLP: its gradient against finite differences, float against double, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/mlp.h"
#include "gradcheck.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::cptr;

// features 5, hidden {7, 3}, classes 4: odd widths, a bottleneck, ~100 parameters.
ModelConfig small_mlp(std::vector<std::int64_t> hidden = {7, 3}) {
  ModelConfig c;
  c.name = "mlp-gradcheck";
  c.kind = ModelKind::kMlp;
  c.features = 5;
  c.hidden = std::move(hidden);
  c.classes = 4;
  return c;
}

TEST(MlpTest, GradientOfEveryParameterMatchesFiniteDifferences) {
  // No hidden layer (a linear classifier), one, two.
  for (const auto& hidden : {std::vector<std::int64_t>{}, {6}, {7, 3}}) {
    const ModelConfig c = small_mlp(hidden);
    for (std::int64_t rows : {1, 6}) {
      Mlp<double> model(c);
      std::vector<double> p = testing::random_params(model.layout(), 51);
      const std::vector<double> x = testing::random_vector(rows * c.features, 52);
      const auto labels = testing::random_tokens(rows, c.classes, 53);
      model.forward(cptr(p), cptr(x), labels.data(), rows);
      std::vector<double> grads(p.size(), 0.0);
      model.backward(cptr(p), grads.data(), 0.5);
      Mlp<double> probe(c);
      const auto numeric = testing::numeric_gradient(
          p, [&] { return 0.5 * probe.forward(cptr(p), cptr(x), labels.data(), rows); });
      SCOPED_TRACE("hidden layers " + std::to_string(hidden.size()) + ", rows " +
                   std::to_string(rows));
      EXPECT_TRUE(testing::gradients_match("mlp dparams", grads, numeric));
    }
  }
}

TEST(MlpTest, FloatModelMatchesDoubleModel) {
  const ModelConfig c = model_config("mlp-tiny");
  const ParamLayout layout = param_layout(c);
  std::vector<float> pf(layout.size());
  init_params(c, layout, 3, pf.data());
  const std::vector<double> pd(pf.begin(), pf.end());
  const std::int64_t rows = 32;
  const std::vector<double> xd = testing::random_vector(rows * c.features, 54);
  const std::vector<float> xf(xd.begin(), xd.end());
  const std::vector<double> xr(xf.begin(), xf.end());
  const auto labels = testing::random_tokens(rows, c.classes, 55);
  Mlp<double> md(c);
  Mlp<float> mf(c);
  const double ld = md.forward(cptr(pd), cptr(xr), labels.data(), rows);
  const double lf = mf.forward(cptr(pf), cptr(xf), labels.data(), rows);
  // Three layers of ≤ 64-term sums: √64·u ≈ 5e-7 each; 1e-5 is a 5× margin.
  EXPECT_NEAR(lf, ld, 1e-5 * ld);
}

TEST(MlpTest, BadInputRaisesInvalidArgument) {
  const ModelConfig c = small_mlp();
  Mlp<double> model(c);
  const std::vector<double> p = testing::random_params(model.layout(), 56);
  const std::vector<double> x(2 * c.features, 0.5);
  const std::vector<std::int32_t> bad{1, 4};
  try {
    model.forward(cptr(p), cptr(x), bad.data(), 2);
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("label 4 of row 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model.forward(cptr(p), cptr(x), bad.data(), 0), InvalidArgument);
  std::vector<double> g(p.size());
  EXPECT_THROW(model.backward(cptr(p), g.data()), InvalidArgument);
  EXPECT_THROW(Mlp<double>{model_config("gpt-tiny")}, InvalidArgument);
}

}  // namespace
}  // namespace dtw::model
