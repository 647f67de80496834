// The flat parameter layout of each model kind, and its initialisation.
#include "dtw/model/params.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "dtw/errors.h"
#include "dtw/model/random.h"
#include "dtw/model/units.h"

namespace dtw::model {
namespace {

// GPT-2's initial standard deviation for weight matrices and embeddings.
constexpr double kGptInitStd = 0.02;

// Appends views one after another, so offsets are contiguous by construction.
class LayoutBuilder {
 public:
  void add(std::string name, std::vector<std::int64_t> shape, int layer, ParamInit init,
           double init_std = 0) {
    ParamView v;
    v.name = std::move(name);
    v.size = 1;
    for (std::int64_t s : shape) v.size *= s;
    v.shape = std::move(shape);
    v.offset = next_;
    v.layer = layer;
    // Weight decay on matrices only: decaying a gain towards 0 or a bias
    // towards 0 is not a useful prior (GPT-2, nanoGPT do the same).
    v.decay = v.shape.size() >= 2;
    v.init = init;
    v.init_std = init_std;
    next_ += v.size;
    views_.push_back(std::move(v));
  }
  std::vector<ParamView> take() { return std::move(views_); }

 private:
  std::vector<ParamView> views_;
  std::int64_t next_ = 0;
};

std::vector<ParamView> gpt_views(const ModelConfig& c) {
  const std::int64_t C = c.dim, F = c.mlp_hidden;
  // Each block adds two residual projections; scaling them by 1/√(2L) keeps
  // the variance of the residual stream independent of depth (GPT-2 §2.3).
  const double residual_std =
      kGptInitStd / std::sqrt(2.0 * static_cast<double>(std::max<std::int64_t>(c.layers, 1)));
  LayoutBuilder b;
  b.add("wte", {c.vocab, C}, -1, ParamInit::kNormal, kGptInitStd);
  b.add("wpe", {c.context, C}, -1, ParamInit::kNormal, kGptInitStd);
  for (int l = 0; l < static_cast<int>(c.layers); ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    b.add(h + "ln1.gamma", {C}, l, ParamInit::kOnes);
    b.add(h + "ln1.beta", {C}, l, ParamInit::kZeros);
    b.add(h + "attn.qkv.weight", {3 * C, C}, l, ParamInit::kNormal, kGptInitStd);
    b.add(h + "attn.qkv.bias", {3 * C}, l, ParamInit::kZeros);
    b.add(h + "attn.proj.weight", {C, C}, l, ParamInit::kNormal, residual_std);
    b.add(h + "attn.proj.bias", {C}, l, ParamInit::kZeros);
    b.add(h + "ln2.gamma", {C}, l, ParamInit::kOnes);
    b.add(h + "ln2.beta", {C}, l, ParamInit::kZeros);
    b.add(h + "mlp.fc.weight", {F, C}, l, ParamInit::kNormal, kGptInitStd);
    b.add(h + "mlp.fc.bias", {F}, l, ParamInit::kZeros);
    b.add(h + "mlp.proj.weight", {C, F}, l, ParamInit::kNormal, residual_std);
    b.add(h + "mlp.proj.bias", {C}, l, ParamInit::kZeros);
  }
  b.add("lnf.gamma", {C}, -1, ParamInit::kOnes);
  b.add("lnf.beta", {C}, -1, ParamInit::kZeros);
  if (!head_is_tied(c)) b.add("head.weight", {c.vocab, C}, -1, ParamInit::kNormal, kGptInitStd);
  return b.take();
}

std::vector<ParamView> mlp_views(const ModelConfig& c) {
  LayoutBuilder b;
  std::int64_t in = c.features;
  const std::size_t linears = c.hidden.size() + 1;
  for (std::size_t i = 0; i < linears; ++i) {
    const std::int64_t out = i < c.hidden.size() ? c.hidden[i] : c.classes;
    const std::string f = "fc." + std::to_string(i) + ".";
    // N(0, 1/fan_in) keeps the pre-activations at unit scale layer after layer.
    b.add(f + "weight", {out, in}, static_cast<int>(i), ParamInit::kNormal,
          1.0 / std::sqrt(static_cast<double>(in)));
    b.add(f + "bias", {out}, static_cast<int>(i), ParamInit::kZeros);
    in = out;
  }
  return b.take();
}

}  // namespace

ParamLayout::ParamLayout(std::vector<ParamView> views) : views_(std::move(views)) {
  std::set<std::string, std::less<>> names;
  int last_layer = -1;
  bool after_layers = false;  // seen a −1 view after a layer's views
  for (const ParamView& v : views_) {
    std::int64_t product = 1;
    for (std::int64_t s : v.shape) {
      DTW_CHECK_ARG(s >= 0, "ParamLayout: view " << v.name << " has a negative extent " << s);
      product *= s;
    }
    DTW_CHECK_ARG(v.size == product, "ParamLayout: view " << v.name << " has size " << v.size
                                                          << " but its shape holds " << product);
    DTW_CHECK_ARG(v.offset == size_, "ParamLayout: view " << v.name << " starts at " << v.offset
                                                          << ", expected " << size_
                                                          << " (views must be contiguous)");
    DTW_CHECK_ARG(names.insert(v.name).second,
                  "ParamLayout: view name " << v.name << " appears twice");
    if (v.layer >= 0) {
      DTW_CHECK_ARG(!after_layers && v.layer >= last_layer,
                    "ParamLayout: view " << v.name << " of layer " << v.layer
                                         << " is out of order (layers must be contiguous)");
      last_layer = v.layer;
      layers_ = v.layer + 1;
    } else {
      DTW_CHECK_ARG(v.layer == -1, "ParamLayout: view " << v.name << " has layer " << v.layer);
      after_layers = after_layers || last_layer >= 0;
    }
    size_ += v.size;
  }
}

const ParamView& ParamLayout::find(std::string_view name) const {
  for (const ParamView& v : views_) {
    if (v.name == name) return v;
  }
  DTW_CHECK_ARG(false, "ParamLayout: no parameter named '" << name << "'");
  return views_.front();  // not reached
}

std::pair<std::int64_t, std::int64_t> ParamLayout::layer_range(int layer) const {
  DTW_CHECK_ARG(layer >= 0 && layer < layers_,
                "ParamLayout: layer " << layer << " is outside [0, " << layers_ << ")");
  std::int64_t begin = -1, end = -1;
  for (const ParamView& v : views_) {
    if (v.layer != layer) continue;
    if (begin < 0) begin = v.offset;
    end = v.offset + v.size;
  }
  if (begin < 0) return {0, 0};  // a layer without parameters (not built by dtw)
  return {begin, end};
}

std::vector<ParamView> ParamLayout::views_of_layer(int layer) const {
  DTW_CHECK_ARG(layer >= -1 && layer < layers_,
                "ParamLayout: layer " << layer << " is outside [-1, " << layers_ << ")");
  std::vector<ParamView> out;
  for (const ParamView& v : views_) {
    if (v.layer == layer) out.push_back(v);
  }
  return out;
}

ParamLayout param_layout(const ModelConfig& config) {
  validate(config);
  return ParamLayout(config.kind == ModelKind::kGpt ? gpt_views(config) : mlp_views(config));
}

double init_value(const ParamView& view, std::uint64_t seed, std::int64_t index) {
  DTW_CHECK_ARG(index >= 0 && index < view.size, "init_value: index "
                                                     << index << " of " << view.name
                                                     << " is outside [0, " << view.size << ")");
  switch (view.init) {
    case ParamInit::kZeros: return 0.0;
    case ParamInit::kOnes: return 1.0;
    case ParamInit::kNormal: break;
  }
  // Keyed by the tensor's name, not its offset: the value does not change when
  // another tensor is added before it or when the tensor is cut into shards.
  return view.init_std * normal(hash_key(seed, hash_name(view.name),
                                         static_cast<std::uint64_t>(view.slice.whole_index(index))));
}

std::int64_t ParamView::whole_size() const {
  if (whole_shape.empty()) return size;
  std::int64_t n = 1;
  for (std::int64_t s : whole_shape) n *= s;
  return n;
}

template <TrainElement T>
void init_params(const ModelConfig& config, const ParamLayout& layout, std::uint64_t seed,
                 T* params) {
  const ParamLayout expected = param_layout(config);
  DTW_CHECK_ARG(layout.size() == expected.size(), "init_params: layout has "
                                                      << layout.size() << " parameters but model "
                                                      << config.name << " has " << expected.size());
  for (const ParamView& v : layout.views()) {
    T* p = params + v.offset;
    for (std::int64_t i = 0; i < v.size; ++i) p[i] = static_cast<T>(init_value(v, seed, i));
  }
}

template void init_params<float>(const ModelConfig&, const ParamLayout&, std::uint64_t, float*);
template void init_params<double>(const ModelConfig&, const ParamLayout&, std::uint64_t, double*);

}  // namespace dtw::model
