// Named configurations, the flat parameter layout, and initialisation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/data.h"
#include "dtw/model/params.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(ConfigTest, NamedConfigsHaveTheDocumentedShapes) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"mlp-tiny", "gpt-tiny", "gpt-small",
                                                     "gpt-base", "gpt2-124m"}));
  const ModelConfig mlp = model_config("mlp-tiny");
  EXPECT_EQ(mlp.kind, ModelKind::kMlp);
  EXPECT_EQ(mlp.features, 16);
  EXPECT_EQ(mlp.hidden, (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(mlp.classes, 8);
  const ModelConfig tiny = model_config("gpt-tiny");
  EXPECT_EQ(tiny.kind, ModelKind::kGpt);
  EXPECT_EQ(tiny.vocab, kCharVocab);
  EXPECT_EQ(
      std::vector<std::int64_t>({tiny.context, tiny.dim, tiny.heads, tiny.layers, tiny.mlp_hidden}),
      std::vector<std::int64_t>({32, 64, 4, 2, 256}));
  EXPECT_TRUE(tiny.tied_head);
  const ModelConfig small = model_config("gpt-small");
  EXPECT_EQ(std::vector<std::int64_t>({small.vocab, small.context, small.dim, small.heads,
                                       small.layers, small.mlp_hidden}),
            std::vector<std::int64_t>({96, 128, 256, 8, 4, 1024}));
  // GPT-2 small, the model of llm.c's GPU figures: 124,439,808 parameters
  // (wte 50257·768, wpe 1024·768, 12 blocks of 7,087,872, the final norm).
  const ModelConfig gpt2 = model_config("gpt2-124m");
  EXPECT_EQ(std::vector<std::int64_t>(
                {gpt2.vocab, gpt2.context, gpt2.dim, gpt2.heads, gpt2.layers, gpt2.mlp_hidden}),
            std::vector<std::int64_t>({50257, 1024, 768, 12, 12, 3072}));
  EXPECT_EQ(param_layout(gpt2).size(), 124'439'808);
  for (const std::string& name : model_names()) EXPECT_NO_THROW(validate(model_config(name)));
}

TEST(ConfigTest, UnknownNameListsTheKnownOnes) {
  const std::string what = message_of([] { model_config("gpt-huge"); });
  for (const char* part : {"gpt-huge", "mlp-tiny", "gpt-tiny", "gpt-small"})
    EXPECT_NE(what.find(part), std::string::npos) << what;
}

TEST(ConfigTest, ValidationNamesTheBadField) {
  ModelConfig c = model_config("gpt-tiny");
  c.heads = 5;
  EXPECT_NE(message_of([&] { validate(c); }).find("dim 64 is not divisible by heads 5"),
            std::string::npos);
  c = model_config("gpt-tiny");
  c.vocab = 0;
  EXPECT_NE(message_of([&] { param_layout(c); }).find("vocab 0"), std::string::npos);
  c = model_config("mlp-tiny");
  c.hidden = {64, -2};
  EXPECT_NE(message_of([&] { validate(c); }).find("hidden width 1 is -2"), std::string::npos);
}

// Parameters of one GPT block: two norms, qkv, proj, fc, proj.
std::int64_t block_size(const ModelConfig& c) {
  const std::int64_t C = c.dim, F = c.mlp_hidden;
  return 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (F * C + F) + (C * F + C);
}

TEST(ParamLayoutTest, GptLayoutIsContiguousInLayerOrderWithTheFormulaSizes) {
  for (bool tied : {true, false}) {
    for (const ModelConfig& base :
         {model_config("gpt-tiny"), model_config("gpt-small"), testing::gradcheck_gpt()}) {
      ModelConfig c = base;
      c.tied_head = tied;
      const ParamLayout layout = param_layout(c);
      const std::int64_t C = c.dim;
      EXPECT_EQ(layout.size(), c.vocab * C + c.context * C + c.layers * block_size(c) + 2 * C +
                                   (tied ? 0 : c.vocab * C));
      EXPECT_EQ(layout.layers(), c.layers);
      // No gaps, no overlaps: each view starts where the previous ended.
      std::int64_t next = 0;
      for (const ParamView& v : layout.views()) {
        EXPECT_EQ(v.offset, next) << v.name;
        next = v.offset + v.size;
        EXPECT_EQ(v.decay, v.shape.size() == 2) << v.name;
      }
      EXPECT_EQ(next, layout.size());
      // Embeddings, then the blocks back to back, then the final norm (and head).
      EXPECT_EQ(layout.layer_range(0).first, (c.vocab + c.context) * C);
      for (int l = 0; l < layout.layers(); ++l) {
        const auto [begin, end] = layout.layer_range(l);
        EXPECT_EQ(end - begin, block_size(c)) << "layer " << l;
        if (l > 0) {
          EXPECT_EQ(begin, layout.layer_range(l - 1).second);
        }
        EXPECT_EQ(layout.views_of_layer(l).size(), 12u);
      }
      std::vector<std::string> outer;
      for (const ParamView& v : layout.views_of_layer(-1)) outer.push_back(v.name);
      std::vector<std::string> want{"wte", "wpe", "lnf.gamma", "lnf.beta"};
      if (!tied) want.push_back("head.weight");
      EXPECT_EQ(outer, want);
    }
  }
}

TEST(ParamLayoutTest, FindsViewsByNameWithDocumentedShapes) {
  const ModelConfig c = model_config("gpt-tiny");
  const ParamLayout layout = param_layout(c);
  EXPECT_EQ(layout.find("h.1.attn.qkv.weight").shape, (std::vector<std::int64_t>{192, 64}));
  EXPECT_EQ(layout.find("h.1.attn.proj.weight").shape, (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(layout.find("h.0.mlp.fc.weight").shape, (std::vector<std::int64_t>{256, 64}));
  EXPECT_EQ(layout.find("h.0.mlp.proj.weight").shape, (std::vector<std::int64_t>{64, 256}));
  EXPECT_EQ(layout.find("h.0.mlp.proj.weight").layer, 0);
  EXPECT_NE(message_of([&] { layout.find("head.weight"); }).find("'head.weight'"),
            std::string::npos);
  EXPECT_THROW(layout.layer_range(2), InvalidArgument);
  EXPECT_THROW(layout.layer_range(-1), InvalidArgument);
}

TEST(ParamLayoutTest, MlpLayoutHasOneLayerPerLinear) {
  const ModelConfig c = model_config("mlp-tiny");
  const ParamLayout layout = param_layout(c);
  EXPECT_EQ(layout.size(), (16 * 64 + 64) + (64 * 64 + 64) + (64 * 8 + 8));
  EXPECT_EQ(layout.layers(), 3);
  EXPECT_EQ(layout.layer_range(1),
            (std::pair<std::int64_t, std::int64_t>{16 * 64 + 64, 16 * 64 + 64 + 64 * 64 + 64}));
  EXPECT_EQ(layout.find("fc.2.weight").shape, (std::vector<std::int64_t>{8, 64}));
  EXPECT_TRUE(layout.views_of_layer(-1).empty());
}

TEST(ParamLayoutTest, RejectsGapsDuplicatesAndDisorder) {
  auto view = [](std::string name, std::int64_t offset, std::int64_t size, int layer) {
    ParamView v;
    v.name = std::move(name);
    v.shape = {size};
    v.offset = offset;
    v.size = size;
    v.layer = layer;
    return v;
  };
  EXPECT_NO_THROW(ParamLayout({view("a", 0, 2, -1), view("b", 2, 3, 0), view("c", 5, 1, -1)}));
  EXPECT_NE(message_of([&] {
              ParamLayout({view("a", 0, 2, -1), view("b", 3, 3, 0)});
            }).find("b starts at 3, expected 2"),
            std::string::npos);
  EXPECT_THROW(ParamLayout({view("a", 0, 2, 0), view("a", 2, 1, 0)}), InvalidArgument);
  EXPECT_THROW(ParamLayout({view("a", 0, 2, 1), view("b", 2, 1, 0)}), InvalidArgument);
  EXPECT_THROW(ParamLayout({view("a", 0, 2, 0), view("b", 2, 1, -1), view("c", 3, 1, 1)}),
               InvalidArgument);
  ParamView bad = view("a", 0, 2, 0);
  bad.shape = {3};
  EXPECT_THROW(ParamLayout({bad}), InvalidArgument);
}

TEST(InitTest, ValuesFollowTheGpt2Scheme) {
  const ModelConfig c = model_config("gpt-small");
  const ParamLayout layout = param_layout(c);
  std::vector<double> p(layout.size());
  init_params(c, layout, 5, p.data());
  auto stats = [&](const std::string& name) {
    const ParamView& v = layout.find(name);
    double sum = 0, sq = 0;
    for (std::int64_t i = 0; i < v.size; ++i) {
      sum += p[v.offset + i];
      sq += p[v.offset + i] * p[v.offset + i];
    }
    const double mean = sum / static_cast<double>(v.size);
    return std::pair{mean, std::sqrt(sq / static_cast<double>(v.size) - mean * mean)};
  };
  // 196,608 samples: the sample std is within ~0.2% of σ; 2% is > 5 standard errors.
  auto [qm, qs] = stats("h.2.attn.qkv.weight");
  EXPECT_NEAR(qs, 0.02, 0.02 * 0.02);
  EXPECT_NEAR(qm, 0.0, 0.001);
  auto [pm, ps] = stats("h.3.mlp.proj.weight");  // scaled by 1/√(2·4)
  EXPECT_NEAR(ps, 0.02 / std::sqrt(8.0), 0.02 * 0.02 / std::sqrt(8.0));
  EXPECT_EQ(stats("h.0.ln1.gamma"), (std::pair{1.0, 0.0}));
  EXPECT_EQ(stats("h.0.attn.qkv.bias"), (std::pair{0.0, 0.0}));
  EXPECT_EQ(stats("lnf.beta"), (std::pair{0.0, 0.0}));
}

TEST(InitTest, ValueDependsOnNameAndIndexNotOnPositionOrOrder) {
  const ModelConfig a = model_config("gpt-tiny");
  ModelConfig b = a;
  b.context = 17;       // a shorter position table moves every block's offset
  b.tied_head = false;  // and adds a tensor
  const ParamLayout la = param_layout(a), lb = param_layout(b);
  std::vector<float> pa(la.size()), pb(lb.size());
  init_params(a, la, 9, pa.data());
  init_params(b, lb, 9, pb.data());
  for (const char* name : {"wte", "h.1.attn.qkv.weight", "h.0.mlp.proj.weight", "lnf.gamma"}) {
    const ParamView& va = la.find(name);
    const ParamView& vb = lb.find(name);
    if (std::string(name) != "wte") {
      ASSERT_NE(va.offset, vb.offset) << name;
    }
    for (std::int64_t i = 0; i < va.size; ++i)
      ASSERT_EQ(pa[va.offset + i], pb[vb.offset + i]) << name << " index " << i;
  }
  // A slice initialised on its own (as a ZeRO or TP rank does) matches.
  const ParamView& v = la.find("h.1.mlp.fc.weight");
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, v.size / 3, v.size - 1})
    EXPECT_EQ(static_cast<float>(init_value(v, 9, i)), pa[v.offset + i]) << "index " << i;
  EXPECT_NE(init_value(v, 9, 0), init_value(v, 10, 0));  // the seed matters
  EXPECT_NE(init_value(v, 9, 0), init_value(la.find("h.0.mlp.fc.weight"), 9, 0));
  EXPECT_THROW(init_value(v, 9, v.size), InvalidArgument);
}

}  // namespace
}  // namespace dtw::model
