// The parallel MLP: y = GELU(x W_fcᵀ + b_fc) W_projᵀ + b_proj on t ranks
// with ONE allreduce forward and one backward.
//
//   x (whole) ─ f ─ column-parallel fc ─ GELU ─ row-parallel proj ─ g ─ + b_proj ─ y (whole)
//                   (rank r: hidden units [r·F/t, (r+1)·F/t))
//
// Why only one: cut fc by columns (its output features) and each rank holds
// whole hidden units. GELU acts on each value alone, so GELU of the rank's
// hidden units needs nothing from the other ranks -- the hidden layer never
// has to be gathered. proj, cut by rows (its input features), eats exactly
// those hidden units and leaves a partial sum of the output: g adds them.
// Cutting fc by rows instead would leave partial sums *before* the GELU,
// and GELU(a + b) ≠ GELU(a) + GELU(b): a second allreduce, of rows·F values,
// four times the width.
//
// Bytes per rank: forward 2(t−1)/t·rows·C·e (g), backward the same (f').
#include "dtw/kernels/activations.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {

template <TrainElement T>
void parallel_mlp_forward(Comm& group, T* y, MlpActivations<T>& cache, const T* x,
                          const MlpSlice<const T>& w, std::int64_t rows, std::int64_t dim,
                          std::int64_t hidden_local) {
  // @lab 06.3: Parallel MLP forward: one allreduce, at the end.
  // @hint 1: The first matrix cut by output features, the second by input features, and the
  // @hint 1: activation in between on the rank's own hidden units. Only the output needs a sum.
  // @hint 2: pre = column-parallel fc(x) on [rows, hidden_local]; act = GELU(pre), element-wise;
  // @hint 2: y = row-parallel proj(act) with proj's bias. Keep pre and act in the cache for
  // @hint 2: the backward (resize them first).
  // @hint 3: column_parallel_forward(group, pre, x, w.fc_weight, w.fc_bias, {rows, dim, F});
  // @hint 3: kernels::gelu_forward(act, pre, rows·F); row_parallel_forward(group, y, act,
  // @hint 3: w.proj_weight, w.proj_bias, {rows, F, dim});
  const std::int64_t n = rows * hidden_local;
  cache.pre.resize(static_cast<std::size_t>(n));
  cache.act.resize(static_cast<std::size_t>(n));
  column_parallel_forward(group, cache.pre.data(), x, w.fc_weight, w.fc_bias,
                          {rows, dim, hidden_local});
  kernels::gelu_forward(cache.act.data(), cache.pre.data(), n);
  row_parallel_forward(group, y, cache.act.data(), w.proj_weight, w.proj_bias,
                       {rows, hidden_local, dim});
  // @end
}

template <TrainElement T>
void parallel_mlp_backward(Comm& group, T* dx, const MlpSlice<T>& grads, const T* dy, const T* x,
                           const MlpActivations<T>& cache, const MlpSlice<const T>& w,
                           std::int64_t rows, std::int64_t dim, std::int64_t hidden_local) {
  // @lab 06.3: Parallel MLP backward: the forward's three steps in reverse, one allreduce.
  // @hint 1: Go back through proj, the GELU and fc. Only the gradient at the input needs
  // @hint 1: the other ranks.
  // @hint 2: dact = row-parallel backward of proj (no message); dpre = dact ∘ GELU'(pre);
  // @hint 2: dx = column-parallel backward of fc (its f' is the one allreduce).
  // @hint 3: std::vector<T> d(rows·F); row_parallel_backward(group, d, grads.proj_weight,
  // @hint 3: grads.proj_bias, dy, act, w.proj_weight, {rows, F, dim}); kernels::gelu_backward(
  // @hint 3: d, pre, d, rows·F); column_parallel_backward(group, dx, grads.fc_weight,
  // @hint 3: grads.fc_bias, d, x, w.fc_weight, {rows, dim, F});
  const std::int64_t n = rows * hidden_local;
  std::vector<T> d(static_cast<std::size_t>(n));
  row_parallel_backward(group, d.data(), grads.proj_weight, grads.proj_bias, dy,
                        cache.act.data(), w.proj_weight, {rows, hidden_local, dim});
  kernels::gelu_backward(d.data(), cache.pre.data(), d.data(), n);
  column_parallel_backward(group, dx, grads.fc_weight, grads.fc_bias, d.data(), x, w.fc_weight,
                           {rows, dim, hidden_local});
  // @end
}

#define DTW_CH06_MLP(T)                                                                         \
  template void parallel_mlp_forward<T>(Comm&, T*, MlpActivations<T>&, const T*,                \
                                        const MlpSlice<const T>&, std::int64_t, std::int64_t,   \
                                        std::int64_t);                                          \
  template void parallel_mlp_backward<T>(Comm&, T*, const MlpSlice<T>&, const T*, const T*,     \
                                         const MlpActivations<T>&, const MlpSlice<const T>&,    \
                                         std::int64_t, std::int64_t, std::int64_t);
DTW_CH06_MLP(float)
DTW_CH06_MLP(double)

}  // namespace dtw::ch06
