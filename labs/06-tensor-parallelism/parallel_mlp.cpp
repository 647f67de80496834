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
  DTW_TODO("06.3: Parallel MLP forward: one allreduce, at the end.");
}

template <TrainElement T>
void parallel_mlp_backward(Comm& group, T* dx, const MlpSlice<T>& grads, const T* dy, const T* x,
                           const MlpActivations<T>& cache, const MlpSlice<const T>& w,
                           std::int64_t rows, std::int64_t dim, std::int64_t hidden_local) {
  DTW_TODO("06.3: Parallel MLP backward: the forward's three steps in reverse, one allreduce.");
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
