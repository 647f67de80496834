#pragma once
/// @file
/// The MLP: Linear → GELU → … → Linear → softmax cross-entropy, with an
/// explicit backward pass, over a flat parameter buffer (params.h). The
/// smallest model a parallel chapter can train (class_batch in data.h gives it
/// a learnable task).

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"
#include "dtw/model/units.h"
#include "dtw/types.h"

namespace dtw::model {

/// One layer of the MLP: `pre = x Wᵀ + b` (x [rows, in], W [out, in]), then
/// `y = GELU(pre)` when `gelu`, else y = pre and `pre` may be nullptr (the
/// classifier). y [rows, out] is overwritten. The kernels run on `at`, where
/// every tensor must live.
template <TrainElement T>
void mlp_layer_forward(T* y, T* pre, const T* x, const T* w, const T* b, std::int64_t rows,
                       std::int64_t in, std::int64_t out, bool gelu, LayerTimes* times = nullptr,
                       const kernels::Place& at = kernels::Place::host());

/// Backward of mlp_layer_forward: overwrites dx (skipped when nullptr) and dy
/// (it becomes the gradient at `pre`); accumulates dW and db; on `at`.
template <TrainElement T>
void mlp_layer_backward(T* dx, T* dw, T* db, T* dy, const T* x, const T* pre, const T* w,
                        std::int64_t rows, std::int64_t in, std::int64_t out, bool gelu,
                        LayerTimes* times = nullptr,
                        const kernels::Place& at = kernels::Place::host());

/// Everything one forward pass keeps for its backward pass.
template <class T>
struct MlpActivations {
  std::int64_t rows = 0;             ///< examples in the batch
  kernels::Vector<std::int32_t> labels;  ///< [rows], copied from forward() to the model's Place
  /// x[0] the inputs, x[i + 1] the output of layer i (the last one: logits).
  std::vector<kernels::Vector<T>> x;
  /// pre[i]: layer i before its GELU (empty for the classifier).
  std::vector<kernels::Vector<T>> pre;
  /// @var probs
  /// softmax of the logits, [rows, classes]
  kernels::Vector<T> probs, losses;  ///< per-row cross-entropy, [rows]
  UnitRange range;               ///< the layers (units) the forward ran
};

/// A multi-layer perceptron of a kMlp configuration.
template <TrainElement T>
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
  /// Where every kernel of the passes runs (default: the host): the
  /// parameters, gradients and inputs must live there; the activations
  /// (kernels::Vector) follow it, and the labels forward() is given (the
  /// host's) are checked and copied there.
  void set_place(const kernels::Place& at) { place_ = at; }
  /// The Place set by set_place.
  const kernels::Place& place() const { return place_; }

  /// Classifies inputs [rows, features] and returns the mean cross-entropy
  /// against labels [rows] (ids in [0, classes)); keeps the activations.
  /// rows ≥ 1, otherwise InvalidArgument.
  T forward(const T* params, const T* inputs, const std::int32_t* labels, std::int64_t rows);

  /// Accumulates `loss_scale ×` the gradient of the last forward's mean loss
  /// into grads (layout().size() elements).
  void backward(const T* params, T* grads, T loss_scale = T(1));
  /// backward() that reports each layer's gradient range the moment it is
  /// final, last layer first (units.h, GradReady); on_grad_ready may be empty.
  void backward(const T* params, T* grads, T loss_scale, const GradReady& on_grad_ready);

  // ---- stages: a run of layers on an input activation (pipeline, ZeRO-3) ----

  /// The units of this model: one per linear layer, "fc.0" … (units.h).
  const std::vector<Unit>& units() const { return units_; }
  /// Runs layers `range` (begin < end ≤ layers()) on x_in [rows, width of
  /// layer begin's input] (the inputs when begin == 0) with parameters from
  /// `access`; when the range ends with the classifier, returns the mean loss
  /// against labels [rows], otherwise 0 with output() holding the activation.
  T forward(UnitAccess<T>& access, UnitRange range, const T* x_in, const std::int32_t* labels,
            std::int64_t rows);
  /// Backward of the last forward over its range, from the loss or from
  /// `dx_out` (the gradient of output()); reports ranges like backward()
  /// above and leaves the gradient of x_in in input_grad() when begin > 0.
  void backward(UnitAccess<T>& access, const T* dx_out, T loss_scale,
                const GradReady& on_grad_ready);
  /// The last forward's output activation [rows, width].
  std::span<const T> output() const;
  /// The gradient of the last forward's x_in after backward (empty when the
  /// range starts at the inputs).
  std::span<const T> input_grad() const;
  /// Bytes of activations a forward over `range` keeps for `rows` examples:
  /// exactly what activations() holds after it.
  std::int64_t activation_bytes(UnitRange range, std::int64_t rows) const;
  /// Frees the activations (activation checkpointing).
  void release_activations();

  /// What the last forward kept (overwritten by the next forward).
  const MlpActivations<T>& activations() const { return acts_; }

 private:
  std::int64_t width(int boundary) const;  // width of x[boundary]
  void check_range(UnitRange range, const char* call) const;
  ModelConfig config_;
  ParamLayout layout_;
  std::vector<Unit> units_;
  LayerTimes* times_ = nullptr;
  kernels::Place place_ = kernels::Place::host();
  MlpActivations<T> acts_;
  bool has_forward_ = false;
  kernels::Vector<T> grad_a_, grad_b_;  // ping-pong gradients of consecutive layers
  std::span<const T> input_grad_;   // into grad_a_ or grad_b_ after a stage's backward
};

}  // namespace dtw::model
