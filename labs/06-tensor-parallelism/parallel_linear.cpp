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
  DTW_TODO("06.2: Column-parallel forward: the rank's output columns from the whole input.");
}

template <TrainElement T>
void column_parallel_backward(Comm& group, T* dx, T* dw_local, T* db_local, const T* dy_local,
                              const T* x, const T* w_local, const LinearDims& d) {
  DTW_TODO("06.2: Column-parallel backward: local weight gradients, and the whole input gradient.");
}

template <TrainElement T>
void row_parallel_forward(Comm& group, T* y, const T* x_local, const T* w_local, const T* b,
                          const LinearDims& d) {
  DTW_TODO("06.2: Row-parallel forward: partial products summed over the group, the bias added once.");
}

template <TrainElement T>
void row_parallel_backward(Comm& group, T* dx_local, T* dw_local, T* db, const T* dy,
                           const T* x_local, const T* w_local, const LinearDims& d) {
  DTW_TODO("06.2: Row-parallel backward: every gradient from the whole dy, no message.");
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
