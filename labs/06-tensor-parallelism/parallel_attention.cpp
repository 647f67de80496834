// Parallel attention: the heads split between the ranks.
//
//   x (whole) ─ f ─ qkv of the rank's heads ─ core on heads_local heads ─ merge ─ proj columns ─ g ─ + b ─ y
//
// Heads never look at each other: head h's output depends only on head h's
// queries, keys and values. So rank r takes heads [r·H/t, (r+1)·H/t): the
// q, k and v rows of those heads of W_qkv (column-parallel: no message), runs
// the ordinary causal attention on them, and multiplies the merged heads by
// the matching columns of W_proj (row-parallel: a partial sum, which g adds).
// The same pattern as the MLP, with "hidden units" read as "heads": one
// allreduce of rows·C values forward (g), one backward (f').
//
// The q, k and v rows of a rank's heads are not contiguous in the whole
// W_qkv (its rows are [q of all heads; k of all heads; v of all heads]); the
// shard's layout (model/shard.h) hands each rank exactly its three blocks,
// in the order [q; k; v] that the split below expects.
#include "dtw/model/gpt_layers.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {
template <class T>
T* sized(std::vector<T>& v, std::int64_t n) {
  v.resize(static_cast<std::size_t>(n));
  return v.data();
}
kernels::AttentionShape shape_of(const AttentionDims& d) {
  return {d.batch, d.heads_local, d.seq, d.seq, d.head_dim};
}
}  // namespace

template <TrainElement T>
void parallel_attention_forward(Comm& group, T* y, AttentionActivations<T>& cache, const T* x,
                                const AttentionSlice<const T>& w, const AttentionDims& d,
                                model::AttentionCore<T>& core) {
  DTW_TODO("06.4: Parallel attention forward: the rank's heads, then one sum.");
}

template <TrainElement T>
void parallel_attention_backward(Comm& group, T* dx, const AttentionSlice<T>& grads, const T* dy,
                                 const T* x, const AttentionActivations<T>& cache,
                                 const AttentionSlice<const T>& w, const AttentionDims& d,
                                 model::AttentionCore<T>& core) {
  DTW_TODO("06.4: Parallel attention backward: the forward in reverse, one allreduce.");
}

#define DTW_CH06_ATTENTION(T)                                                                  \
  template void parallel_attention_forward<T>(Comm&, T*, AttentionActivations<T>&, const T*,   \
                                              const AttentionSlice<const T>&,                  \
                                              const AttentionDims&, model::AttentionCore<T>&); \
  template void parallel_attention_backward<T>(                                                \
      Comm&, T*, const AttentionSlice<T>&, const T*, const T*, const AttentionActivations<T>&, \
      const AttentionSlice<const T>&, const AttentionDims&, model::AttentionCore<T>&);
DTW_CH06_ATTENTION(float)
DTW_CH06_ATTENTION(double)

}  // namespace dtw::ch06
