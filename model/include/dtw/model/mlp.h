#pragma once
/// @file
/// The MLP: Linear → GELU → … → Linear → softmax cross-entropy, with an
/// explicit backward pass, over a flat parameter buffer (params.h). The
/// smallest model a parallel chapter can train (class_batch in data.h gives it
/// a learnable task).

#include <cstdint>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"

namespace dtw::model {

/// One layer of the MLP: `pre = x Wᵀ + b` (x [rows, in], W [out, in]), then
/// `y = GELU(pre)` when `gelu`, else y = pre and `pre` may be nullptr (the
/// classifier). y [rows, out] is overwritten.
template <class T>
void mlp_layer_forward(T* y, T* pre, const T* x, const T* w, const T* b, std::int64_t rows,
                       std::int64_t in, std::int64_t out, bool gelu, LayerTimes* times = nullptr);

/// Backward of mlp_layer_forward: overwrites dx (skipped when nullptr) and dy
/// (it becomes the gradient at `pre`); accumulates dW and db.
template <class T>
void mlp_layer_backward(T* dx, T* dw, T* db, T* dy, const T* x, const T* pre, const T* w,
                        std::int64_t rows, std::int64_t in, std::int64_t out, bool gelu,
                        LayerTimes* times = nullptr);

/// Everything one forward pass keeps for its backward pass.
template <class T>
struct MlpActivations {
  std::int64_t rows = 0;             ///< examples in the batch
  std::vector<std::int32_t> labels;  ///< [rows], copied from forward()
  /// x[0] the inputs, x[i + 1] the output of layer i (the last one: logits).
  std::vector<std::vector<T>> x;
  /// pre[i]: layer i before its GELU (empty for the classifier).
  std::vector<std::vector<T>> pre;
  /// @var probs
  /// softmax of the logits, [rows, classes]
  std::vector<T> probs, losses;  ///< per-row cross-entropy, [rows]
};

/// A multi-layer perceptron of a kMlp configuration.
template <class T>
class Mlp {
 public:
  /// Validates the configuration (InvalidArgument if bad or not an MLP).
  explicit Mlp(const ModelConfig& config);

  /// The configuration this model was built from.
  const ModelConfig& config() const { return config_; }
  /// Where each tensor lives in the flat params/grads buffers.
  const ParamLayout& layout() const { return layout_; }
  /// Number of linear layers (hidden layers + the classifier).
  int layers() const { return layout_.layers(); }
  /// Records per-layer-kind time into `times` from now on (nullptr: stop).
  void set_times(LayerTimes* times) { times_ = times; }

  /// Classifies inputs [rows, features] and returns the mean cross-entropy
  /// against labels [rows] (ids in [0, classes)); keeps the activations.
  /// rows ≥ 1, otherwise InvalidArgument.
  T forward(const T* params, const T* inputs, const std::int32_t* labels, std::int64_t rows);

  /// Accumulates `loss_scale ×` the gradient of the last forward's mean loss
  /// into grads (layout().size() elements).
  void backward(const T* params, T* grads, T loss_scale = T(1));

  /// What the last forward kept (overwritten by the next forward).
  const MlpActivations<T>& activations() const { return acts_; }

 private:
  std::int64_t width(int boundary) const;  // width of x[boundary]
  ModelConfig config_;
  ParamLayout layout_;
  LayerTimes* times_ = nullptr;
  MlpActivations<T> acts_;
  bool has_forward_ = false;
  std::vector<T> grad_a_, grad_b_;  // ping-pong gradients of consecutive layers
};

}  // namespace dtw::model
