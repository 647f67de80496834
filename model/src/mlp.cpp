// The MLP: linear layers with GELU between them, then softmax cross-entropy.
#include "dtw/model/mlp.h"

#include <algorithm>
#include <string>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/cross_entropy.h"
#include "dtw/model/gpt_layers.h"  // linear_forward / linear_backward

namespace dtw::model {

using detail::sized;

template <class T>
void mlp_layer_forward(T* y, T* pre, const T* x, const T* w, const T* b, std::int64_t rows,
                       std::int64_t in, std::int64_t out, bool gelu, LayerTimes* times) {
  if (!gelu) {
    linear_forward(y, x, w, b, rows, in, out, times);
    return;
  }
  linear_forward(pre, x, w, b, rows, in, out, times);
  ScopedLayerTimer timer(times, "gelu");
  kernels::gelu_forward(y, static_cast<const T*>(pre), rows * out);
}

template <class T>
void mlp_layer_backward(T* dx, T* dw, T* db, T* dy, const T* x, const T* pre, const T* w,
                        std::int64_t rows, std::int64_t in, std::int64_t out, bool gelu,
                        LayerTimes* times) {
  if (gelu) {
    // y = GELU(pre)  ⇒  dpre = dy ∘ GELU'(pre), computed in place.
    ScopedLayerTimer timer(times, "gelu");
    kernels::gelu_backward(dy, pre, static_cast<const T*>(dy), rows * out);
  }
  // pre = x Wᵀ + b  ⇒  dx = dpre W, dW += dpreᵀ x, db += Σ_rows dpre.
  linear_backward(dx, dw, db, static_cast<const T*>(dy), x, w, rows, in, out, times);
}

template <class T>
Mlp<T>::Mlp(const ModelConfig& config) : config_(config) {
  DTW_CHECK_ARG(config.kind == ModelKind::kMlp,
                "Mlp: model " << config.name << " is a " << name_of(config.kind) << ", not an mlp");
  layout_ = param_layout(config_);  // validates
}

template <class T>
std::int64_t Mlp<T>::width(int boundary) const {
  if (boundary == 0) return config_.features;
  if (boundary == layers()) return config_.classes;
  return config_.hidden[static_cast<std::size_t>(boundary - 1)];
}

template <class T>
T Mlp<T>::forward(const T* params, const T* inputs, const std::int32_t* labels, std::int64_t rows) {
  DTW_CHECK_ARG(rows >= 1, "Mlp::forward: rows " << rows << " must be at least 1");
  for (std::int64_t r = 0; r < rows; ++r) {
    DTW_CHECK_ARG(labels[r] >= 0 && labels[r] < config_.classes,
                  "Mlp::forward: label " << labels[r] << " of row " << r
                                         << " is outside [0, classes " << config_.classes << ")");
  }
  has_forward_ = false;
  const int n = layers();
  MlpActivations<T>& a = acts_;
  a.rows = rows;
  a.labels.assign(labels, labels + rows);
  a.x.resize(static_cast<std::size_t>(n + 1));
  a.pre.resize(static_cast<std::size_t>(n));
  std::copy_n(inputs, rows * config_.features, sized(a.x[0], rows * config_.features));
  for (int i = 0; i < n; ++i) {
    const std::string f = "fc." + std::to_string(i) + ".";
    const bool gelu = i + 1 < n;  // every layer but the classifier
    T* pre = gelu ? sized(a.pre[i], rows * width(i + 1)) : nullptr;
    mlp_layer_forward(sized(a.x[i + 1], rows * width(i + 1)), pre, a.x[i].data(),
                      params + layout_.find(f + "weight").offset,
                      params + layout_.find(f + "bias").offset, rows, width(i), width(i + 1), gelu,
                      times_);
  }
  ScopedLayerTimer timer(times_, "loss");
  const T loss =
      kernels::cross_entropy_forward(sized(a.probs, rows * config_.classes), sized(a.losses, rows),
                                     a.x[n].data(), labels, rows, config_.classes);
  has_forward_ = true;
  return loss;
}

template <class T>
void Mlp<T>::backward(const T* params, T* grads, T loss_scale) {
  DTW_CHECK_ARG(has_forward_, "Mlp::backward: no completed forward pass to differentiate");
  const int n = layers();
  const MlpActivations<T>& a = acts_;
  std::int64_t widest = 0;
  for (int i = 0; i <= n; ++i) widest = std::max(widest, width(i));
  T* dy = sized(grad_a_, a.rows * widest);
  T* dx = sized(grad_b_, a.rows * widest);
  {
    // Mean loss over the rows: each row's loss enters with weight loss_scale/rows.
    ScopedLayerTimer timer(times_, "loss");
    kernels::cross_entropy_backward(dy, a.probs.data(), a.labels.data(), a.rows, config_.classes,
                                    loss_scale / static_cast<T>(a.rows));
  }
  for (int i = n - 1; i >= 0; --i) {
    const std::string f = "fc." + std::to_string(i) + ".";
    // The inputs have no gradient to compute, so layer 0 skips its dx product.
    mlp_layer_backward(i > 0 ? dx : nullptr, grads + layout_.find(f + "weight").offset,
                       grads + layout_.find(f + "bias").offset, dy, a.x[i].data(),
                       a.pre[i].empty() ? nullptr : a.pre[i].data(),
                       params + layout_.find(f + "weight").offset, a.rows, width(i), width(i + 1),
                       i + 1 < n, times_);
    std::swap(dx, dy);  // this layer's input gradient is the next one's output gradient
  }
}

#define DTW_INSTANTIATE(T)                                                                        \
  template void mlp_layer_forward<T>(T*, T*, const T*, const T*, const T*, std::int64_t,          \
                                     std::int64_t, std::int64_t, bool, LayerTimes*);              \
  template void mlp_layer_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, std::int64_t, \
                                      std::int64_t, std::int64_t, bool, LayerTimes*);             \
  template class Mlp<T>;
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
