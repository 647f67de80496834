// Units, stage passes and the gradient-ready hook: a model cut into stages, or
// run through per-unit buffers, computes exactly what the whole model does;
// the hook reports every element once, units in backward order, a block
// tensor by tensor, the embedding last; the activation count is what the
// forward keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/gpt.h"
#include "dtw/model/mlp.h"
#include "dtw/model/units.h"
#include "model_test_util.h"

namespace dtw::model {
namespace {

using testing::random_params;
using testing::random_tokens;

TEST(UnitsTest, GptUnitsTileTheLayoutInForwardOrder) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);
    const ParamLayout layout = param_layout(c);
    const std::vector<Unit> units = model_units(c, layout);
    ASSERT_EQ(units.size(), static_cast<std::size_t>(c.layers + 2));
    EXPECT_EQ(units.front().name, "embed");
    EXPECT_EQ(units[1].name, "h.0");
    EXPECT_EQ(units.back().name, "head");
    EXPECT_EQ(units.front().begin, 0);
    for (std::size_t u = 1; u < units.size(); ++u) EXPECT_EQ(units[u].begin, units[u - 1].end);
    EXPECT_EQ(units.back().end, layout.size());
    EXPECT_EQ(units[1].begin, layout.layer_range(0).first);
    EXPECT_EQ(units[1].end, layout.layer_range(0).second);
    EXPECT_EQ(units.front().end, layout.find("wpe").offset + layout.find("wpe").size);
  }
  const ModelConfig mlp = model_config("mlp-tiny");
  const std::vector<Unit> m = model_units(mlp, param_layout(mlp));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[2].name, "fc.2");
}

// Forward + backward of the whole model, recording the hook's ranges.
struct Whole {
  double loss = 0;
  std::vector<double> grads;
  std::vector<std::pair<std::int64_t, std::int64_t>> ready;
};

Whole whole_gpt(const ModelConfig& c, const std::vector<double>& p,
                const std::vector<std::int32_t>& tok, const std::vector<std::int32_t>& tgt,
                std::int64_t batch, std::int64_t seq) {
  Gpt<double> gpt(c);
  Whole w;
  w.grads.assign(p.size(), 0.0);
  w.loss = gpt.forward(p.data(), tok.data(), tgt.data(), batch, seq);
  gpt.backward(p.data(), w.grads.data(), 1.0,
               [&](std::int64_t b, std::int64_t e) { w.ready.emplace_back(b, e); });
  return w;
}

// The ranges that tile `u`, in the order the hook reported them.
std::vector<std::pair<std::int64_t, std::int64_t>> ranges_in(
    const Unit& u, const std::vector<std::pair<std::int64_t, std::int64_t>>& ready) {
  std::vector<std::pair<std::int64_t, std::int64_t>> in;
  for (const auto& r : ready)
    if (r.first >= u.begin && r.second <= u.end) in.push_back(r);
  return in;
}

TEST(UnitsTest, GradReadyReportsBlocksTensorByTensorLastUnitFirstEmbeddingLast) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);
    const ParamLayout layout = param_layout(c);
    const std::vector<Unit> units = model_units(c, layout);
    const auto p = random_params(layout, 3);
    const auto tok = random_tokens(2 * 5, c.vocab, 4), tgt = random_tokens(2 * 5, c.vocab, 5);
    const Whole w = whole_gpt(c, p, tok, tgt, 2, 5);
    // Units in backward order, each a run of consecutive reports that tile it
    // exactly: the head and the embedding whole, a block one report per tensor.
    std::size_t at = 0;
    for (auto it = units.rbegin(); it != units.rend(); ++it) {
      const Unit& u = *it;
      const auto in = ranges_in(u, w.ready);
      const bool block = u.name.rfind("h.", 0) == 0;
      ASSERT_EQ(in.size(), block ? 12u : 1u) << u.name << (tied ? " tied" : " untied");
      std::int64_t covered = 0;
      for (const auto& r : in) {
        ASSERT_LT(at, w.ready.size());
        EXPECT_EQ(w.ready[at++], r) << u.name << ": its reports are not consecutive";
        covered += r.second - r.first;
      }
      EXPECT_EQ(covered, u.size()) << u.name;
      if (block) {
        // Each report is one tensor of the layout, from the block's last
        // tensor to its first: the MLP's projection bias first, LN1's gamma
        // last. So buckets packed in reverse layout order complete in order.
        const std::string h = u.name + ".";
        EXPECT_EQ(in.front().first, layout.find(h + "mlp.proj.bias").offset);
        EXPECT_EQ(in.back().first, layout.find(h + "ln1.gamma").offset);
        for (std::size_t i = 0; i < in.size(); ++i) {
          const auto& views = layout.views();
          EXPECT_TRUE(std::any_of(views.begin(), views.end(), [&](const ParamView& v) {
            return v.offset == in[i].first && v.offset + v.size == in[i].second;
          })) << u.name << ": [" << in[i].first << ", " << in[i].second << ") is not one tensor";
          if (i > 0) {
            EXPECT_EQ(in[i].second, in[i - 1].first) << u.name << ", report " << i;
          }
        }
      }
    }
    EXPECT_EQ(at, w.ready.size());
    EXPECT_EQ(w.ready.back(), std::make_pair(units.front().begin, units.front().end));
    // The plain backward gives the same gradient as the hooked one.
    Gpt<double> gpt(c);
    std::vector<double> g(p.size(), 0.0);
    gpt.forward(p.data(), tok.data(), tgt.data(), 2, 5);
    gpt.backward(p.data(), g.data());
    EXPECT_EQ(g, w.grads);
  }
}

TEST(UnitsTest, WholeUnitsHearsOfEachUnitOnceItIsComplete) {
  const ModelConfig c = testing::gradcheck_gpt(true);
  const ParamLayout layout = param_layout(c);
  const std::vector<Unit> units = model_units(c, layout);
  const auto p = random_params(layout, 3);
  const auto tok = random_tokens(10, c.vocab, 4), tgt = random_tokens(10, c.vocab, 5);
  Gpt<double> gpt(c);
  std::vector<double> g(p.size(), 0.0);
  std::vector<std::pair<std::int64_t, std::int64_t>> heard;
  const GradReady hook = whole_units(units, [&](std::int64_t b, std::int64_t e) {
    heard.emplace_back(b, e);
  });
  for (int pass = 0; pass < 2; ++pass) {  // counted afresh for the second pass
    heard.clear();
    gpt.forward(p.data(), tok.data(), tgt.data(), 2, 5);
    gpt.backward(p.data(), g.data(), 1.0, hook);
    ASSERT_EQ(heard.size(), units.size()) << "pass " << pass;
    for (std::size_t i = 0; i < units.size(); ++i) {
      const Unit& u = units[units.size() - 1 - i];
      EXPECT_EQ(heard[i], std::make_pair(u.begin, u.end)) << "pass " << pass << ", " << u.name;
    }
  }
}

TEST(UnitsTest, WholeUnitsRefusesARangeAcrossUnitsOrReportedTwice) {
  const std::vector<Unit> units = {{"a", 0, 4}, {"b", 4, 10}};
  int calls = 0;
  const GradReady hook = whole_units(units, [&](std::int64_t, std::int64_t) { ++calls; });
  try {
    hook(2, 6);
    FAIL() << "a range across two units was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 6) is not inside one unit"), std::string::npos)
        << e.what();
  }
  hook(4, 10);
  EXPECT_EQ(calls, 1);
  hook(0, 3);
  try {
    hook(1, 3);
    FAIL() << "elements reported twice were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unit a [0, 4) got [1, 3)"), std::string::npos)
        << e.what();
  }
}

TEST(UnitsTest, GradReadyRangesAreFinalWhenReported) {
  // Snapshot each range at its report; at the end nothing may have changed.
  const ModelConfig c = testing::gradcheck_gpt(true);
  const ParamLayout layout = param_layout(c);
  const auto p = random_params(layout, 6);
  const auto tok = random_tokens(10, c.vocab, 7), tgt = random_tokens(10, c.vocab, 8);
  Gpt<double> gpt(c);
  std::vector<double> g(p.size(), 0.0);
  std::map<std::int64_t, std::vector<double>> seen;
  gpt.forward(p.data(), tok.data(), tgt.data(), 2, 5);
  gpt.backward(p.data(), g.data(), 1.0, [&](std::int64_t b, std::int64_t e) {
    seen[b].assign(g.begin() + b, g.begin() + e);
  });
  for (const auto& [b, values] : seen)
    EXPECT_TRUE(std::equal(values.begin(), values.end(), g.begin() + b)) << "range at " << b;
}

// Per-unit buffers, as a ZeRO-3 rank gathers them: parameters copied into a
// fresh buffer per acquisition (released after), gradients per unit.
class PerUnitAccess final : public UnitAccess<double> {
 public:
  PerUnitAccess(const std::vector<Unit>& units, const std::vector<double>& p)
      : units_(units), p_(p), grads_(units.size()) {}
  const double* params(int u) override {
    const Unit& unit = units_[u];
    auto& slot = live_[u];
    slot.emplace_back(p_.begin() + unit.begin, p_.begin() + unit.end);
    ++acquired;
    return slot.back().data();
  }
  void release_params(int u) override {
    ASSERT_FALSE(live_[u].empty()) << "release without acquire of unit " << u;
    live_[u].pop_back();
    ++released;
  }
  double* grads(int u) override {
    auto& g = grads_[static_cast<std::size_t>(u)];
    if (g.empty()) g.assign(static_cast<std::size_t>(units_[u].size()), 0.0);
    return g.data();
  }
  std::vector<double> flat() const {
    std::vector<double> out;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      std::vector<double> g = grads_[u];
      g.resize(static_cast<std::size_t>(units_[u].size()), 0.0);
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  }
  int acquired = 0, released = 0;
  bool all_released() const {
    for (const auto& [u, v] : live_)
      if (!v.empty()) return false;
    return true;
  }

 private:
  const std::vector<Unit>& units_;
  const std::vector<double>& p_;
  std::vector<std::vector<double>> grads_;
  std::map<int, std::vector<std::vector<double>>> live_;
};

TEST(UnitsTest, PerUnitBuffersGiveTheWholeModelsGradientBitwise) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);
    const ParamLayout layout = param_layout(c);
    const auto p = random_params(layout, 9);
    const auto tok = random_tokens(10, c.vocab, 10), tgt = random_tokens(10, c.vocab, 11);
    const Whole w = whole_gpt(c, p, tok, tgt, 2, 5);
    Gpt<double> gpt(c);
    PerUnitAccess access(gpt.units(), p);
    const int U = static_cast<int>(gpt.units().size());
    const double loss = gpt.forward(access, {0, U}, tok.data(), nullptr, tgt.data(), 2, 5);
    gpt.backward(access, nullptr, 1.0, {});
    EXPECT_EQ(loss, w.loss);
    EXPECT_EQ(access.flat(), w.grads) << (tied ? "tied" : "untied");
    EXPECT_EQ(access.acquired, access.released);
    EXPECT_TRUE(access.all_released());
  }
}

TEST(UnitsTest, GptStagesChainedEqualTheWholeModel) {
  for (bool tied : {true, false}) {
    const ModelConfig c = testing::gradcheck_gpt(tied);  // units: embed h.0 h.1 head
    const ParamLayout layout = param_layout(c);
    const auto p = random_params(layout, 12);
    const auto tok = random_tokens(10, c.vocab, 13), tgt = random_tokens(10, c.vocab, 14);
    const Whole w = whole_gpt(c, p, tok, tgt, 2, 5);
    // Three stages: [embed, h.0) [h.1] [head]; gradients into one buffer.
    const std::vector<UnitRange> stages = {{0, 2}, {2, 3}, {3, 4}};
    std::vector<Gpt<double>> gpts(3, Gpt<double>(c));
    std::vector<double> g(p.size(), 0.0);
    FlatAccess<double> access(gpts[0].units(), p.data(), g.data());
    std::vector<double> x;
    double loss = 0;
    for (int s = 0; s < 3; ++s) {
      loss = gpts[s].forward(access, stages[s], s == 0 ? tok.data() : nullptr,
                             s == 0 ? nullptr : x.data(), tgt.data(), 2, 5);
      const auto out = gpts[s].output();
      x.assign(out.begin(), out.end());
    }
    EXPECT_EQ(loss, w.loss);
    std::vector<std::pair<std::int64_t, std::int64_t>> ready;
    std::vector<double> dx;
    for (int s = 2; s >= 0; --s) {
      gpts[s].backward(access, s == 2 ? nullptr : dx.data(), 1.0,
                       [&](std::int64_t b, std::int64_t e) { ready.emplace_back(b, e); });
      const auto in = gpts[s].input_grad();
      EXPECT_EQ(in.empty(), s == 0);
      dx.assign(in.begin(), in.end());
    }
    EXPECT_EQ(g, w.grads);
    // The stages report what the whole model does, in the same order;
    // tied, the head stage reports wte's range too (its share is done there).
    std::vector<std::pair<std::int64_t, std::int64_t>> expected = w.ready;
    const ParamView& wte = layout.find("wte");
    if (tied) expected.insert(expected.begin() + 1, {wte.offset, wte.offset + wte.size});
    EXPECT_EQ(ready, expected);
  }
}

TEST(UnitsTest, ActivationBytesAreWhatTheForwardKeeps) {
  const ModelConfig c = testing::gradcheck_gpt(true);
  const auto p = random_params(param_layout(c), 15);
  const auto tok = random_tokens(15, c.vocab, 16), tgt = random_tokens(15, c.vocab, 17);
  auto bytes_of = [](const GptActivations<double>& a) {
    std::int64_t n = 0;
    auto add = [&](const auto& v) {
      n += static_cast<std::int64_t>(v.size() * sizeof(typename std::decay_t<decltype(v)>::value_type));
    };
    add(a.tokens);
    add(a.targets);
    for (const auto& x : a.x) add(x);
    for (const auto& b : a.blocks) {
      for (const auto* v : {&b.ln1, &b.ln1_mean, &b.ln1_rstd, &b.attn.qkv, &b.attn.q, &b.attn.k,
                            &b.attn.v, &b.attn.core.probs, &b.attn.per_head, &b.attn.merged, &b.mid,
                            &b.ln2, &b.ln2_mean, &b.ln2_rstd, &b.mlp.pre, &b.mlp.act})
        add(*v);
    }
    for (const auto* v : {&a.head.ln, &a.head.mean, &a.head.rstd, &a.head.logits, &a.head.probs,
                          &a.head.losses})
      add(*v);
    return n;
  };
  Gpt<double> gpt(c);
  std::vector<double> x(static_cast<std::size_t>(15 * c.dim), 0.5);
  for (UnitRange r : {UnitRange{0, 4}, UnitRange{0, 2}, UnitRange{1, 3}, UnitRange{2, 4},
                      UnitRange{3, 4}}) {
    FlatAccess<double> access(gpt.units(), p.data(), nullptr);
    gpt.forward(access, r, tok.data(), x.data(), tgt.data(), 3, 5);
    EXPECT_EQ(gpt.activation_bytes(r, 3, 5), bytes_of(gpt.activations()))
        << "units [" << r.begin << ", " << r.end << ")";
  }
  gpt.release_activations();
  EXPECT_EQ(bytes_of(gpt.activations()), 0);
}

TEST(UnitsTest, MlpStagesEqualTheWholeModel) {
  const ModelConfig c = model_config("mlp-tiny");
  const ParamLayout layout = param_layout(c);
  const auto p = random_params(layout, 18);
  std::vector<double> in(static_cast<std::size_t>(4 * c.features));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.1 * static_cast<double>(i % 7) - 0.3;
  const std::vector<std::int32_t> labels = {1, 0, 7, 3};
  Mlp<double> whole(c);
  std::vector<double> gw(p.size(), 0.0);
  const double lw = whole.forward(p.data(), in.data(), labels.data(), 4);
  whole.backward(p.data(), gw.data());
  Mlp<double> a(c), b(c);
  std::vector<double> g(p.size(), 0.0);
  FlatAccess<double> access(a.units(), p.data(), g.data());
  a.forward(access, {0, 1}, in.data(), nullptr, 4);
  const std::vector<double> mid(a.output().begin(), a.output().end());
  EXPECT_EQ(b.forward(access, {1, 3}, mid.data(), labels.data(), 4), lw);
  EXPECT_EQ(b.activation_bytes({1, 3}, 4), static_cast<std::int64_t>(
                (mid.size() + 4 * 64 + 4 * 8 + 4 * 64 + 4 * 8 + 4) * sizeof(double) + 4 * 4));
  int reports = 0;
  b.backward(access, nullptr, 1.0, [&](std::int64_t, std::int64_t) { ++reports; });
  const std::vector<double> dmid(b.input_grad().begin(), b.input_grad().end());
  a.backward(access, dmid.data(), 1.0, [&](std::int64_t, std::int64_t) { ++reports; });
  EXPECT_EQ(g, gw);
  EXPECT_EQ(reports, 3);
}

TEST(UnitsTest, BadStageCallsNameTheProblem) {
  const ModelConfig c = testing::gradcheck_gpt(true);
  const auto p = random_params(param_layout(c), 19);
  Gpt<double> gpt(c);
  FlatAccess<double> access(gpt.units(), p.data(), nullptr);
  const auto tok = random_tokens(5, c.vocab, 20);
  try {
    gpt.forward(access, {2, 9}, tok.data(), nullptr, nullptr, 1, 5);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unit range [2, 9)"), std::string::npos) << e.what();
  }
  try {
    gpt.forward(access, {1, 4}, tok.data(), nullptr, nullptr, 1, 5);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input activation x_in"), std::string::npos) << e.what();
  }
  std::vector<double> x(static_cast<std::size_t>(5 * c.dim), 0.1);
  gpt.forward(access, {1, 2}, nullptr, x.data(), nullptr, 1, 5);
  EXPECT_THROW(gpt.backward(access, nullptr, 1.0, {}), InvalidArgument);  // needs dx_out
}

}  // namespace
}  // namespace dtw::model
