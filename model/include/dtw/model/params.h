#pragma once
/// @file
/// The flat parameter buffer: where each named tensor of a model lives, and
/// how it is initialised.
///
/// All parameters of a model are one contiguous array (and so are its
/// gradients and optimiser state, laid out the same way). This is what the
/// parallel chapters cut up: DDP packs it into buckets, ZeRO gives each rank a
/// contiguous shard, a pipeline stage owns the range of its layers.
///
/// GPT layout, in this order (C = dim, F = mlp_hidden, V = vocab):
///
///     wte [V, C]  wpe [context, C]                          layer −1
///     h.l.ln1.gamma [C]  h.l.ln1.beta [C]                   layer l (l = 0 … L−1)
///     h.l.attn.qkv.weight [3C, C]  h.l.attn.qkv.bias [3C]
///     h.l.attn.proj.weight [C, C]  h.l.attn.proj.bias [C]
///     h.l.ln2.gamma [C]  h.l.ln2.beta [C]
///     h.l.mlp.fc.weight [F, C]  h.l.mlp.fc.bias [F]
///     h.l.mlp.proj.weight [C, F]  h.l.mlp.proj.bias [C]
///     lnf.gamma [C]  lnf.beta [C]                           layer −1
///     head.weight [V, C]   (only when the head is not tied to wte)
///
/// Weights are stored [out, in] (PyTorch's convention): a linear layer
/// computes y = x Wᵀ + b. The rows of the qkv weight (and of its bias and
/// output columns) are [q rows; k rows; v rows], C rows each, and within each
/// third head h owns the head_dim rows h·D … (h+1)·D − 1. A tensor-parallel
/// rank owning heads [h0, h1) therefore takes three row ranges, one from each
/// third.
///
/// MLP layout: "fc.i.weight" [out_i, in_i] and "fc.i.bias" [out_i] for each
/// linear layer i (hidden layers, then the classifier), at layer i.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/types.h"

namespace dtw::model {

/// How a tensor starts.
enum class ParamInit {
  kZeros,   ///< biases, layer-norm shifts
  kOnes,    ///< layer-norm gains
  kNormal,  ///< N(0, init_std²): weight matrices and embeddings
};

/// Where the elements of a view sit in the whole model's tensor of the same
/// name: `runs` runs of `run` contiguous elements, run k starting at element
/// `first + k·stride` of the whole tensor. Rows [r0, r1) of a [rows, cols]
/// matrix are one run; a column block is one run per row; the q, k, v rows of
/// some heads are three runs. The default is the identity (the whole tensor).
struct TensorSlice {
  std::int64_t first = 0;   ///< the whole tensor's index of the view's element 0
  std::int64_t run = 0;     ///< elements per run (0: one run, the whole view)
  std::int64_t stride = 0;  ///< distance between the starts of consecutive runs
  /// The whole tensor's index of the view's element i.
  std::int64_t whole_index(std::int64_t i) const {
    return run == 0 ? first + i : first + (i / run) * stride + i % run;
  }
};

/// One named tensor inside the flat buffer.
struct ParamView {
  std::string name;                  ///< unique, e.g. "h.0.attn.qkv.weight" (see the layout above)
  std::vector<std::int64_t> shape;   ///< extents, row-major; weights are [out, in]
  std::int64_t offset = 0;  ///< first element in the flat buffer
  std::int64_t size = 0;    ///< product of shape
  /// −1 for embeddings, final norm and head (GPT); the block (GPT) or linear
  /// layer (MLP) index otherwise.
  int layer = -1;
  /// Whether weight decay applies (matrices and embeddings yes; biases and
  /// norm parameters no, as in GPT-2 / nanoGPT training).
  bool decay = false;
  ParamInit init = ParamInit::kZeros;  ///< how init_value() fills it
  double init_std = 0;  ///< standard deviation for kNormal
  /// Where this view sits in the whole tensor (shard.h: a rank's slice); the
  /// identity for a whole model's view.
  TensorSlice slice;
  /// The whole tensor's shape (empty: the same as shape, the view is whole).
  std::vector<std::int64_t> whole_shape;
  /// Elements of the whole tensor.
  std::int64_t whole_size() const;
  /// True when the view holds the whole tensor.
  bool is_whole() const { return whole_shape.empty() || whole_size() == size; }
};

/// The views of a model, contiguous, in order, without gaps or overlaps.
class ParamLayout {
 public:
  ParamLayout() = default;
  /// Takes views whose offsets run contiguously from 0 and whose sizes are the
  /// products of their shapes, with unique names and layers in non-decreasing
  /// order apart from the −1 views at either end. Raises InvalidArgument
  /// naming the first view that breaks a rule.
  explicit ParamLayout(std::vector<ParamView> views);

  /// Every view, in buffer order.
  const std::vector<ParamView>& views() const { return views_; }
  /// Total number of parameters.
  std::int64_t size() const { return size_; }
  /// Number of layers (GPT blocks or MLP linears): the largest layer index + 1.
  int layers() const { return layers_; }
  /// The view called `name`; InvalidArgument naming it when there is none.
  const ParamView& find(std::string_view name) const;
  /// [begin, end) offsets of layer `layer` (0 ≤ layer < layers()): one
  /// contiguous range, what a pipeline stage owns.
  std::pair<std::int64_t, std::int64_t> layer_range(int layer) const;
  /// The views of one layer in buffer order (−1: the views outside the layers).
  std::vector<ParamView> views_of_layer(int layer) const;

 private:
  std::vector<ParamView> views_;
  std::int64_t size_ = 0;
  int layers_ = 0;
};

/// The layout of a model (the configuration is validated first).
ParamLayout param_layout(const ModelConfig& config);

/// The initial value of element `index` (0 ≤ index < view.size) of a view: a
/// pure function of (seed, view.name, view.slice.whole_index(index)), so any
/// slice of any tensor initialises on its own and matches the whole model's. GPT-2's scheme:
/// N(0, 0.02²) for matrices and embeddings, scaled by 1/√(2·layers) for the
/// projections that write into the residual stream (attn.proj, mlp.proj);
/// zeros for biases and norm shifts; ones for norm gains. MLP linears use
/// N(0, 1/fan_in).
double init_value(const ParamView& view, std::uint64_t seed, std::int64_t index);

/// Writes every parameter's initial value into params (layout.size()
/// elements). `layout` must be param_layout(config). T is float or double.
template <TrainElement T>
void init_params(const ModelConfig& config, const ParamLayout& layout, std::uint64_t seed,
                 T* params);

}  // namespace dtw::model
