// The MLP: linear layers with GELU between them, then softmax cross-entropy.
#include "dtw/model/mlp.h"

#include <algorithm>
#include <string>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/kernels/permute.h"
#include "dtw/model/gpt_layers.h"  // linear_forward / linear_backward

namespace dtw::model {

using detail::sized;

template <TrainElement T>
void mlp_layer_forward(T* y, T* pre, const T* x, const T* w, const T* b, std::int64_t rows,
                       std::int64_t in, std::int64_t out, bool gelu, LayerTimes* times,
                       const kernels::Place& at) {
  if (!gelu) {
    linear_forward(y, x, w, b, rows, in, out, times, at);
    return;
  }
  linear_forward(pre, x, w, b, rows, in, out, times, at);
  ScopedLayerTimer timer(times, "gelu");
  kernels::gelu_forward(at, y, static_cast<const T*>(pre), rows * out);
}

template <TrainElement T>
void mlp_layer_backward(T* dx, T* dw, T* db, T* dy, const T* x, const T* pre, const T* w,
                        std::int64_t rows, std::int64_t in, std::int64_t out, bool gelu,
                        LayerTimes* times, const kernels::Place& at) {
  if (gelu) {
    // y = GELU(pre)  ⇒  dpre = dy ∘ GELU'(pre), computed in place.
    ScopedLayerTimer timer(times, "gelu");
    kernels::gelu_backward(at, dy, pre, static_cast<const T*>(dy), rows * out);
  }
  // pre = x Wᵀ + b  ⇒  dx = dpre W, dW += dpreᵀ x, db += Σ_rows dpre.
  linear_backward(dx, dw, db, static_cast<const T*>(dy), x, w, rows, in, out, times, at);
}

template <TrainElement T>
Mlp<T>::Mlp(const ModelConfig& config) : config_(config) {
  DTW_CHECK_ARG(config.kind == ModelKind::kMlp,
                "Mlp: model " << config.name << " is a " << name_of(config.kind) << ", not an mlp");
  layout_ = param_layout(config_);  // validates
  units_ = model_units(config_, layout_);
}

template <TrainElement T>
std::int64_t Mlp<T>::width(int boundary) const {
  if (boundary == 0) return config_.features;
  if (boundary == layers()) return config_.classes;
  return config_.hidden[static_cast<std::size_t>(boundary - 1)];
}

template <TrainElement T>
void Mlp<T>::check_range(UnitRange range, const char* call) const {
  DTW_CHECK_ARG(0 <= range.begin && range.begin < range.end && range.end <= layers(),
                "Mlp::" << call << ": layer range [" << range.begin << ", " << range.end
                        << ") is empty or outside [0, " << layers() << ")");
}

template <TrainElement T>
T Mlp<T>::forward(const T* params, const T* inputs, const std::int32_t* labels, std::int64_t rows) {
  FlatAccess<T> access(units_, params, nullptr);
  return forward(access, {0, layers()}, inputs, labels, rows);
}

template <TrainElement T>
T Mlp<T>::forward(UnitAccess<T>& access, UnitRange range, const T* x_in,
                  const std::int32_t* labels, std::int64_t rows) {
  check_range(range, "forward");
  DTW_CHECK_ARG(rows >= 1, "Mlp::forward: rows " << rows << " must be at least 1");
  const int n = layers();
  const bool last = range.end == n;
  if (last) {
    for (std::int64_t r = 0; r < rows; ++r) {
      DTW_CHECK_ARG(labels[r] >= 0 && labels[r] < config_.classes,
                    "Mlp::forward: label " << labels[r] << " of row " << r
                                           << " is outside [0, classes " << config_.classes << ")");
    }
  }
  has_forward_ = false;
  MlpActivations<T>& a = acts_;
  a.rows = rows;
  a.range = range;
  a.labels.set_place(place_);
  if (last) a.labels.assign(labels, labels + rows);
  else a.labels.clear();
  a.x.resize(static_cast<std::size_t>(n + 1));
  a.pre.resize(static_cast<std::size_t>(n));
  // Keep only this range's activations: x[begin .. end] and pre[begin, end).
  for (int i = 0; i <= n; ++i)
    if (i < range.begin || i > range.end) a.x[i].clear();
  for (int i = 0; i < n; ++i)
    if (i < range.begin || i >= range.end) a.pre[i].clear();
  if (!last) {
    a.probs.clear();
    a.losses.clear();
  }
  const std::int64_t in = rows * width(range.begin);
  kernels::copy_values(place_, sized(a.x[range.begin], in, place_), x_in, in);
  for (int i = range.begin; i < range.end; ++i) {
    const Unit& u = units_[i];
    const T* p = access.params(i);
    const std::string f = "fc." + std::to_string(i) + ".";
    const bool gelu = i + 1 < n;  // every layer but the classifier
    T* pre = gelu ? sized(a.pre[i], rows * width(i + 1), place_) : nullptr;
    mlp_layer_forward(sized(a.x[i + 1], rows * width(i + 1), place_), pre, a.x[i].data(),
                      p + (layout_.find(f + "weight").offset - u.begin),
                      p + (layout_.find(f + "bias").offset - u.begin), rows, width(i), width(i + 1),
                      gelu, times_, place_);
    access.release_params(i);
  }
  T loss = 0;
  if (last) {
    ScopedLayerTimer timer(times_, "loss");
    loss = kernels::cross_entropy_forward(
        place_, sized(a.probs, rows * config_.classes, place_), sized(a.losses, rows, place_),
        static_cast<const T*>(a.x[n].data()), a.labels.data(), rows, config_.classes);
  }
  has_forward_ = true;
  return loss;
}

template <TrainElement T>
void Mlp<T>::backward(const T* params, T* grads, T loss_scale) {
  backward(params, grads, loss_scale, GradReady());
}

template <TrainElement T>
void Mlp<T>::backward(const T* params, T* grads, T loss_scale, const GradReady& on_grad_ready) {
  FlatAccess<T> access(units_, params, grads);
  backward(access, nullptr, loss_scale, on_grad_ready);
}

template <TrainElement T>
void Mlp<T>::backward(UnitAccess<T>& access, const T* dx_out, T loss_scale,
                      const GradReady& on_grad_ready) {
  DTW_CHECK_ARG(has_forward_, "Mlp::backward: no completed forward pass to differentiate");
  const int n = layers();
  const MlpActivations<T>& a = acts_;
  const bool last = a.range.end == n;
  DTW_CHECK_ARG(last || dx_out != nullptr, "Mlp::backward: layers ["
                                               << a.range.begin << ", " << a.range.end
                                               << ") end before the classifier: pass dx_out");
  std::int64_t widest = 0;
  for (int i = 0; i <= n; ++i) widest = std::max(widest, width(i));
  T* dy = sized(grad_a_, a.rows * widest, place_);
  T* dx = sized(grad_b_, a.rows * widest, place_);
  if (last) {
    // Mean loss over the rows: each row's loss enters with weight loss_scale/rows.
    ScopedLayerTimer timer(times_, "loss");
    kernels::cross_entropy_backward(place_, dy, a.probs.data(), a.labels.data(), a.rows,
                                    config_.classes, loss_scale / static_cast<T>(a.rows));
  } else if (dx_out != nullptr) {  // checked above; the test tells the compiler too
    kernels::copy_values(place_, dy, dx_out, a.rows * width(a.range.end));
  }
  for (int i = a.range.end - 1; i >= a.range.begin; --i) {
    const Unit& u = units_[i];
    const T* p = access.params(i);
    T* g = access.grads(i);
    const std::string f = "fc." + std::to_string(i) + ".";
    // The inputs have no gradient to compute, so layer 0 skips its dx product.
    mlp_layer_backward(i > 0 ? dx : nullptr, g + (layout_.find(f + "weight").offset - u.begin),
                       g + (layout_.find(f + "bias").offset - u.begin), dy, a.x[i].data(),
                       a.pre[i].empty() ? nullptr : a.pre[i].data(),
                       p + (layout_.find(f + "weight").offset - u.begin), a.rows, width(i),
                       width(i + 1), i + 1 < n, times_, place_);
    access.release_params(i);
    if (on_grad_ready) on_grad_ready(u.begin, u.end);
    std::swap(dx, dy);  // this layer's input gradient is the next one's output gradient
  }
  input_grad_ = a.range.begin > 0
                    ? std::span<const T>(dy, static_cast<std::size_t>(a.rows * width(a.range.begin)))
                    : std::span<const T>();
}

template <TrainElement T>
std::span<const T> Mlp<T>::output() const {
  if (!has_forward_) return {};
  return acts_.x[static_cast<std::size_t>(acts_.range.end)];
}

template <TrainElement T>
std::span<const T> Mlp<T>::input_grad() const {
  return has_forward_ ? input_grad_ : std::span<const T>();
}

template <TrainElement T>
std::int64_t Mlp<T>::activation_bytes(UnitRange range, std::int64_t rows) const {
  check_range(range, "activation_bytes");
  const int n = layers();
  std::int64_t values = 0;
  for (int i = range.begin; i <= range.end; ++i) values += rows * width(i);  // x
  for (int i = range.begin; i < range.end; ++i)
    if (i + 1 < n) values += rows * width(i + 1);  // pre, before GELU
  const bool last = range.end == n;
  if (last) values += rows * config_.classes + rows;  // probs, losses
  return values * static_cast<std::int64_t>(sizeof(T)) +
         (last ? rows * static_cast<std::int64_t>(sizeof(std::int32_t)) : 0);
}

template <TrainElement T>
void Mlp<T>::release_activations() {
  acts_ = MlpActivations<T>();
  has_forward_ = false;
  input_grad_ = {};
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void mlp_layer_forward<T>(T*, T*, const T*, const T*, const T*, std::int64_t,          \
                                     std::int64_t, std::int64_t, bool, LayerTimes*,               \
                                     const kernels::Place&);                                      \
  template void mlp_layer_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, std::int64_t, \
                                      std::int64_t, std::int64_t, bool, LayerTimes*,              \
                                      const kernels::Place&);                                     \
  template class Mlp<T>;
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
