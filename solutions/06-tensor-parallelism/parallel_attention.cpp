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
  // @lab 06.4: Parallel attention forward: the rank's heads, then one sum.
  // @hint 1: Heads never mix, so a rank can compute its own heads' queries, keys, values
  // @hint 1: and attention entirely alone; only the output projection mixes heads again.
  // @hint 2: qkv = column-parallel (x, the rank's q/k/v rows), [N, 3·W]; split it into q, k, v
  // @hint 2: of heads_local heads; core forward; merge the heads to [N, W]; then
  // @hint 2: y = row-parallel (merged, proj's columns) + proj bias. Keep everything in cache.
  // @hint 3: N = d.rows(), W = d.width(); the core's positions: model::TokenRuns whole{{{0,
  // @hint 3: d.seq}}} (the whole sequence, one run).
  // @hint 3: column_parallel_forward(group, sized(cache.qkv, N·3W), x, w.qkv_weight,
  // @hint 3: w.qkv_bias, {N, C, 3W}); model::split_qkv(q, k, v, qkv, batch, seq, heads_local,
  // @hint 3: head_dim); core.forward(per_head, cache.core, q, k, v, {batch, heads_local, seq,
  // @hint 3: seq, head_dim}, whole, 0); model::merge_heads(merged, per_head, ...);
  // @hint 3: row_parallel_forward(group, y, merged, w.proj_weight, w.proj_bias, {N, W, C}).
  const std::int64_t N = d.rows(), W = d.width();
  const model::TokenRuns whole{{{0, d.seq}}};  // the core sees the whole sequence
  column_parallel_forward(group, sized(cache.qkv, N * 3 * W), x, w.qkv_weight, w.qkv_bias,
                          {N, d.dim, 3 * W});
  T* q = sized(cache.q, N * W);
  T* k = sized(cache.k, N * W);
  T* v = sized(cache.v, N * W);
  model::split_qkv(q, k, v, cache.qkv.data(), d.batch, d.seq, d.heads_local, d.head_dim);
  core.forward(sized(cache.per_head, N * W), cache.core, q, k, v, shape_of(d), whole, 0);
  model::merge_heads(sized(cache.merged, N * W), cache.per_head.data(), d.batch, d.seq,
                     d.heads_local, d.head_dim);
  row_parallel_forward(group, y, cache.merged.data(), w.proj_weight, w.proj_bias, {N, W, d.dim});
  // @end
}

template <TrainElement T>
void parallel_attention_backward(Comm& group, T* dx, const AttentionSlice<T>& grads, const T* dy,
                                 const T* x, const AttentionActivations<T>& cache,
                                 const AttentionSlice<const T>& w, const AttentionDims& d,
                                 model::AttentionCore<T>& core) {
  // @lab 06.4: Parallel attention backward: the forward in reverse, one allreduce.
  // @hint 1: Walk back through the projection, the heads and the qkv product; only the
  // @hint 1: input's gradient needs the other ranks.
  // @hint 2: dmerged = row-parallel backward (no message); split it to heads; core backward
  // @hint 2: gives dq, dk, dv; join them to dqkv [N, 3W]; dx = column-parallel backward of qkv.
  // @hint 3: row_parallel_backward(group, dmerged, grads.proj_weight, grads.proj_bias, dy,
  // @hint 3: merged, w.proj_weight, {N, W, C}); model::split_heads(dper, dmerged, ...);
  // @hint 3: core.backward(dq, dk, dv, dper, per_head, cache.core, q, k, v, shape, whole, 0);
  // @hint 3: model::join_qkv(dqkv, dq, dk, dv, ...); column_parallel_backward(group, dx,
  // @hint 3: grads.qkv_weight, grads.qkv_bias, dqkv, x, w.qkv_weight, {N, C, 3W}).
  const std::int64_t N = d.rows(), W = d.width();
  const model::TokenRuns whole{{{0, d.seq}}};
  std::vector<T> scratch(static_cast<std::size_t>(8 * N * W));
  T* d_merged = scratch.data();
  T* d_per_head = d_merged + N * W;
  T* dq = d_per_head + N * W;
  T* dk = dq + N * W;
  T* dv = dk + N * W;
  T* dqkv = dv + N * W;
  row_parallel_backward(group, d_merged, grads.proj_weight, grads.proj_bias, dy,
                        cache.merged.data(), w.proj_weight, {N, W, d.dim});
  model::split_heads(d_per_head, d_merged, d.batch, d.seq, d.heads_local, d.head_dim);
  core.backward(dq, dk, dv, d_per_head, cache.per_head.data(), cache.core, cache.q.data(),
                cache.k.data(), cache.v.data(), shape_of(d), whole, 0);
  model::join_qkv(dqkv, dq, dk, dv, d.batch, d.seq, d.heads_local, d.head_dim);
  column_parallel_backward(group, dx, grads.qkv_weight, grads.qkv_bias, dqkv, x, w.qkv_weight,
                           {N, d.dim, 3 * W});
  // @end
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
