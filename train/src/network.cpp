// Network<T>: Gpt<T> and Mlp<T> behind one interface.
#include "dtw/train/network.h"

#include "dtw/errors.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/gpt.h"
#include "dtw/model/mlp.h"

namespace dtw::train {
namespace {

using model::UnitRange;

template <class T>
class GptNetwork final : public Network<T> {
 public:
  GptNetwork(const model::ModelConfig& c, const model::ModelShard& shard) : gpt_(c, shard) {}
  const model::ModelShard& shard() const override { return gpt_.shard(); }
  void set_seams(model::Seams<T>* seams) override { gpt_.set_seams(seams); }
  void set_place(const kernels::Place& at) override { gpt_.set_place(at); }
  const model::ModelConfig& config() const override { return gpt_.config(); }
  const model::ParamLayout& layout() const override { return gpt_.layout(); }
  const std::vector<model::Unit>& units() const override { return gpt_.units(); }
  void set_times(model::LayerTimes* times) override { gpt_.set_times(times); }
  T forward(model::UnitAccess<T>& access, UnitRange range, const Batch& b, const T* x_in) override {
    DTW_CHECK_ARG(b.tokens.size() == static_cast<std::size_t>(b.rows * b.seq_len),
                  "Network::forward: a GPT needs a token batch");
    return gpt_.forward(access, range, b.tokens.data(), x_in, b.targets.data(), b.rows, b.seq_len);
  }
  void backward(model::UnitAccess<T>& access, const T* dx_out, T loss_scale,
                const model::GradReady& ready) override {
    gpt_.backward(access, dx_out, loss_scale, ready);
  }
  std::span<const T> output() const override { return gpt_.output(); }
  std::span<const T> input_grad() const override { return gpt_.input_grad(); }
  std::int64_t boundary_elements(int, const Batch& b) const override {
    return b.rows * b.seq_len * config().dim;
  }
  std::int64_t activation_bytes(UnitRange range, const Batch& b) const override {
    return gpt_.activation_bytes(range, b.rows, b.seq_len);
  }
  double forward_flops(UnitRange range, const Batch& b) const override {
    // 2·N·(weights of every product): qkv, proj, fc and proj per block, the
    // head; plus attention's two products per block (QKᵀ and PV). A shard
    // counts its own heads (W wide), hidden units and vocabulary rows, and its
    // queries against every key of the whole sequence.
    const model::ModelConfig& c = config();
    const model::ModelShard& s = gpt_.shard();
    const auto extent = [](model::IndexRange r, std::int64_t n) {
      const model::IndexRange x = r.resolved(n);
      return static_cast<double>(x.end - x.begin);
    };
    // N: the tokens given; the blocks run on the stream's rows, fewer when
    // the seams cut the sequence (their sublayers may gather it again: the
    // strategy counts that itself).
    const double N = static_cast<double>(b.rows * b.seq_len), C = static_cast<double>(c.dim);
    const double n = s.cut_by_seams ? N / s.sequence_shards : N;
    const double W = extent(s.heads, c.heads) * static_cast<double>(c.head_dim());
    const double F = extent(s.hidden, c.mlp_hidden), V = extent(s.vocab, c.vocab);
    const double S = static_cast<double>(s.cut_by_seams ? b.seq_len : b.seq_len * s.sequence_shards);
    const int U = static_cast<int>(units().size());
    double flops = 0;
    for (int u = range.begin; u < range.end; ++u) {
      if (u == 0) continue;  // the embedding is a lookup
      if (u == U - 1) flops += 2 * N * C * V;
      else flops += 2 * n * (4 * C * W + 2 * C * F) + 2 * 2 * n * S * W;
    }
    return flops;
  }
  void release_activations() override { gpt_.release_activations(); }

 private:
  model::Gpt<T> gpt_;
};

template <class T>
class MlpNetwork final : public Network<T> {
 public:
  void set_seams(model::Seams<T>* seams) override {
    DTW_CHECK_ARG(seams == nullptr, "Network: an mlp has no seams to plug collectives into");
  }
  explicit MlpNetwork(const model::ModelConfig& c) : mlp_(c) {}
  void set_place(const kernels::Place& at) override {
    mlp_.set_place(at);
    inputs_.set_place(at);
  }
  const model::ModelConfig& config() const override { return mlp_.config(); }
  const model::ParamLayout& layout() const override { return mlp_.layout(); }
  const std::vector<model::Unit>& units() const override { return mlp_.units(); }
  void set_times(model::LayerTimes* times) override { mlp_.set_times(times); }
  T forward(model::UnitAccess<T>& access, UnitRange range, const Batch& b, const T* x_in) override {
    const T* in = x_in;
    if (range.begin == 0) {
      DTW_CHECK_ARG(b.inputs.size() == static_cast<std::size_t>(b.rows * config().features),
                    "Network::forward: an MLP needs a class batch");
      // float → T on the host, then to the model's Place.
      const std::vector<T> converted(b.inputs.begin(), b.inputs.end());
      inputs_.assign(converted.begin(), converted.end());
      in = inputs_.data();
    }
    return mlp_.forward(access, range, in, b.labels.data(), b.rows);
  }
  void backward(model::UnitAccess<T>& access, const T* dx_out, T loss_scale,
                const model::GradReady& ready) override {
    mlp_.backward(access, dx_out, loss_scale, ready);
  }
  std::span<const T> output() const override { return mlp_.output(); }
  std::span<const T> input_grad() const override { return mlp_.input_grad(); }
  std::int64_t boundary_elements(int unit, const Batch& b) const override {
    return b.rows * width(unit);
  }
  std::int64_t activation_bytes(UnitRange range, const Batch& b) const override {
    return mlp_.activation_bytes(range, b.rows);
  }
  double forward_flops(UnitRange range, const Batch& b) const override {
    double flops = 0;
    for (int i = range.begin; i < range.end; ++i)
      flops += 2.0 * static_cast<double>(b.rows * width(i) * width(i + 1));
    return flops;
  }
  void release_activations() override { mlp_.release_activations(); }

 private:
  std::int64_t width(int boundary) const {
    const model::ModelConfig& c = config();
    if (boundary == 0) return c.features;
    if (boundary == mlp_.layers()) return c.classes;
    return c.hidden[static_cast<std::size_t>(boundary - 1)];
  }
  model::Mlp<T> mlp_;
  kernels::Vector<T> inputs_;
};

}  // namespace

template <TrainElement T>
std::unique_ptr<Network<T>> Network<T>::make(const model::ModelConfig& config,
                                             const model::ModelShard& shard) {
  if (config.kind == model::ModelKind::kGpt) return std::make_unique<GptNetwork<T>>(config, shard);
  DTW_CHECK_ARG(shard.sequence_shards == 1 && shard.heads.begin == 0 && shard.heads.end < 0 &&
                    shard.hidden.begin == 0 && shard.hidden.end < 0 && shard.vocab.begin == 0 &&
                    shard.vocab.end < 0,
                "Network: only a gpt can be cut into shards; model " << config.name
                                                                     << " is an mlp");
  return std::make_unique<MlpNetwork<T>>(config);
}

template class Network<float>;
template class Network<double>;

}  // namespace dtw::train
