// Column- and row-parallel linear layers: y = x Wᵀ + b with W [out, in]
// cut between t ranks in one of its two directions.
//
//   column-parallel: W cut by rows        row-parallel: W cut by columns
//   (output features)                     (input features)
//
//      x [rows, in]  (whole)                 x_r [rows, in/t] (the rank's columns)
//        │ f                                   │
//        ▼                                     ▼
//   ┌─────────┐ W_0 ┐                     ┌────┬────┐
//   │ rows of │ W_1 ├─ out/t each          │W_0 │W_1 │  in/t columns each
//   │    W    │ ... ┘                     └────┴────┘
//   └─────────┘                                │ partial y_r = x_r W_rᵀ
//        ▼                                     ▼ g (sum over ranks), then + b once
//   y_r [rows, out/t] (the rank's columns)  y [rows, out] (whole)
//
// A column-parallel layer needs no message forward: each rank computes whole
// columns of y. Backward, each rank's dx = dy_r W_r is the gradient through
// its rows only, and f's backward sums them. A row-parallel layer is the
// mirror image: each rank's product is a partial sum of every output value,
// g adds them, and the bias -- replicated, not cut -- is added once after
// the sum (adding it on every rank would add it t times).
#include "dtw/kernels/activations.h"
#include "dtw/model/gpt_layers.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {
template <class T>
std::span<T> span_of(T* p, std::int64_t n) {
  return {p, static_cast<std::size_t>(n)};
}
}  // namespace

template <TrainElement T>
void column_parallel_forward(Comm& group, T* y_local, const T* x, const T* w_local,
                             const T* b_local, const LinearDims& d) {
  // @lab 06.2: Column-parallel forward: the rank's output columns from the whole input.
  // @hint 1: The rank holds some rows of W (some output features) and the whole input.
  // @hint 1: Which part of y can it compute entirely on its own?
  // @hint 2: Pass the input through f (identity), then an ordinary linear layer with the
  // @hint 2: local weight and bias: y_local = x W_localᵀ + b_local, d.out columns.
  // @hint 3: f_forward(group, std::span<const T>(x, rows·in)); then
  // @hint 3: model::linear_forward(y_local, x, w_local, b_local, d.rows, d.in, d.out);
  f_forward(group, span_of(x, d.rows * d.in));
  model::linear_forward(y_local, x, w_local, b_local, d.rows, d.in, d.out);
  // @end
}

template <TrainElement T>
void column_parallel_backward(Comm& group, T* dx, T* dw_local, T* db_local, const T* dy_local,
                              const T* x, const T* w_local, const LinearDims& d) {
  // @lab 06.2: Column-parallel backward: local weight gradients, and the whole input gradient.
  // @hint 1: The weight's and bias's gradients only need the rank's own columns of dy.
  // @hint 1: The input's gradient gets a contribution through every rank's rows of W.
  // @hint 2: linear backward on the local slice gives dW_local, db_local and a partial dx;
  // @hint 2: then f's backward sums the partial dx over the group.
  // @hint 3: model::linear_backward(dx, dw_local, db_local, dy_local, x, w_local, d.rows,
  // @hint 3: d.in, d.out); f_backward(group, std::span<T>(dx, d.rows * d.in));
  model::linear_backward(dx, dw_local, db_local, dy_local, x, w_local, d.rows, d.in, d.out);
  f_backward(group, span_of(dx, d.rows * d.in));
  // @end
}

template <TrainElement T>
void row_parallel_forward(Comm& group, T* y, const T* x_local, const T* w_local, const T* b,
                          const LinearDims& d) {
  // @lab 06.2: Row-parallel forward: partial products summed over the group, the bias added once.
  // @hint 1: Each rank multiplies its columns of the input by its columns of W: a share of
  // @hint 1: every output value. The whole output is the sum of the shares, plus the bias.
  // @hint 2: y = x_local W_localᵀ without the bias; g sums y over the group; then add b to
  // @hint 2: every row, once. The trap: adding b before the sum adds it t times.
  // @hint 3: model::linear_forward(y, x_local, w_local, nullptr, ...); g_forward(group,
  // @hint 3: std::span<T>(y, rows·out)); if (b) kernels::bias_add(y, b, d.rows, d.out);
  model::linear_forward(y, x_local, w_local, static_cast<const T*>(nullptr), d.rows, d.in, d.out);
  g_forward(group, span_of(y, d.rows * d.out));
  if (b != nullptr) kernels::bias_add(y, b, d.rows, d.out);
  // @end
}

template <TrainElement T>
void row_parallel_backward(Comm& group, T* dx_local, T* dw_local, T* db, const T* dy,
                           const T* x_local, const T* w_local, const LinearDims& d) {
  // @lab 06.2: Row-parallel backward: every gradient from the whole dy, no message.
  // @hint 1: Through g's backward every rank holds the whole dy. Its input columns and
  // @hint 1: its columns of W need nothing from the others.
  // @hint 2: g backward (identity), then ordinary linear backward on the local slice; the
  // @hint 2: replicated bias gets Σ_rows dy on every rank, the same values everywhere.
  // @hint 3: g_backward(group, std::span<const T>(dy, rows·out)); model::linear_backward(
  // @hint 3: dx_local, dw_local, db, dy, x_local, w_local, d.rows, d.in, d.out);
  g_backward(group, span_of(dy, d.rows * d.out));
  model::linear_backward(dx_local, dw_local, db, dy, x_local, w_local, d.rows, d.in, d.out);
  // @end
}

#define DTW_CH06_LINEAR(T)                                                                       \
  template void column_parallel_forward<T>(Comm&, T*, const T*, const T*, const T*,              \
                                           const LinearDims&);                                   \
  template void column_parallel_backward<T>(Comm&, T*, T*, T*, const T*, const T*, const T*,     \
                                            const LinearDims&);                                  \
  template void row_parallel_forward<T>(Comm&, T*, const T*, const T*, const T*,                 \
                                        const LinearDims&);                                      \
  template void row_parallel_backward<T>(Comm&, T*, T*, T*, const T*, const T*, const T*,        \
                                         const LinearDims&);
DTW_CH06_LINEAR(float)
DTW_CH06_LINEAR(double)

}  // namespace dtw::ch06
