// One transformer block: the attention sublayer, the MLP sublayer, and the
// pre-norm residual wiring around them, forward and backward.
#include <algorithm>

#include "buffers.h"
#include "dtw/errors.h"
#include "dtw/kernels/activations.h"
#include "dtw/kernels/layernorm.h"
#include "dtw/kernels/permute.h"
#include "dtw/model/gpt_layers.h"

namespace dtw::model {

using detail::sized;

namespace {

// Reports a weight's and a bias's gradients final (a bias may be absent).
// Both became final in the same call; the bias goes first because it lies
// after the weight in the flat buffer, so the block's reports run exactly
// from its last tensor to its first -- the order DDP packs its buckets in,
// which is what lets every bucket complete in bucket order.
template <class T>
void report(const GradFinal<T>& done, const T* weight, std::int64_t weight_count, const T* bias,
            std::int64_t bias_count) {
  if (!done) return;
  if (bias != nullptr) done(bias, bias_count);
  done(weight, weight_count);
}

// The core runs its own kernels on its own Place (AttentionCore::place):
// it must be the layer's, or one of them would read the other's memory.
template <class T>
void check_core_place(const char* who, const AttentionCore<T>& core, const kernels::Place& at) {
  DTW_CHECK_ARG(core.place() == at, who << ": the attention core runs on "
                                        << core.place().describe() << " but the layer on "
                                        << at.describe() << " (AttentionCore::set_place)");
}

kernels::AttentionShape attention_shape(const BlockDims& d) {
  return {d.batch, d.heads, d.seq, d.seq, d.head_dim};
}

// q kᵀ and probs·v: two products of batch·heads·seq·seq·head_dim multiply-adds
// (counted in full although the causal mask makes half of them zero).
double attention_flops(const BlockDims& d) {
  return 4.0 * static_cast<double>(d.batch * d.heads) * static_cast<double>(d.seq) *
         static_cast<double>(d.seq) * static_cast<double>(d.head_dim);
}

}  // namespace

template <TrainElement T>
void attention_sublayer_forward(T* y, AttentionCache<T>& cache, const T* x,
                                const AttentionWeights<const T>& w, const BlockDims& d,
                                LayerTimes* times, AttentionCore<T>* core,
                                const TokenRuns* positions, int layer, const kernels::Place& at) {
  const std::int64_t N = d.rows(), W = d.width(), C = d.dim;
  const TokenRuns whole{{{0, d.seq}}};
  if (core == nullptr) core = &identity_seams<T>().attention();
  if (positions == nullptr) positions = &whole;
  check_core_place("attention_sublayer_forward", *core, at);
  // One product computes the queries, keys and values of every head at once.
  linear_forward(sized(cache.qkv, N * 3 * W, at), x, w.qkv_weight, w.qkv_bias, N, C, 3 * W, times,
                 at);
  {
    ScopedLayerTimer timer(times, "attention", attention_flops(d));
    T* q = sized(cache.q, N * W, at);
    T* k = sized(cache.k, N * W, at);
    T* v = sized(cache.v, N * W, at);
    split_qkv(q, k, v, cache.qkv.data(), d.batch, d.seq, d.heads, d.head_dim, at);
    // The core is the only part that sees other tokens than a row's own:
    // where sequence parallelism exchanges keys and values (seams.h).
    core->forward(sized(cache.per_head, N * W, at), cache.core, q, k, v, attention_shape(d),
                  *positions, layer);
    merge_heads(sized(cache.merged, N * W, at), cache.per_head.data(), d.batch, d.seq, d.heads,
                d.head_dim, at);
  }
  // The output projection mixes the heads back into the residual width.
  linear_forward(y, cache.merged.data(), w.proj_weight, w.proj_bias, N, W, C, times, at);
}

template <TrainElement T>
void attention_sublayer_backward(T* dx, const AttentionWeights<T>& grads, const T* dy, const T* x,
                                 const AttentionCache<T>& cache, const AttentionWeights<const T>& w,
                                 const BlockDims& d, T* scratch, LayerTimes* times,
                                 const GradFinal<T>& done, AttentionCore<T>* core,
                                 const TokenRuns* positions, int layer, const kernels::Place& at) {
  const std::int64_t N = d.rows(), W = d.width(), C = d.dim;
  const TokenRuns whole{{{0, d.seq}}};
  if (core == nullptr) core = &identity_seams<T>().attention();
  if (positions == nullptr) positions = &whole;
  check_core_place("attention_sublayer_backward", *core, at);
  T* d_merged = scratch;
  T* d_per_head = d_merged + N * W;
  T* dq = d_per_head + N * W;
  T* dk = dq + N * W;
  T* dv = dk + N * W;
  T* dqkv = dv + N * W;
  // y = merged Wpᵀ + bp: a linear layer (dmerged = dy Wp, dWp += dyᵀ merged).
  linear_backward(d_merged, grads.proj_weight, grads.proj_bias, dy, cache.merged.data(),
                  w.proj_weight, N, W, C, times, at);
  report<T>(done, grads.proj_weight, C * W, grads.proj_bias, C);
  {
    // The permutes only move numbers, so their gradients are the inverse
    // permutes; the core differentiates softmax(q kᵀ/√D) v.
    ScopedLayerTimer timer(times, "attention", 2 * attention_flops(d));
    split_heads(d_per_head, d_merged, d.batch, d.seq, d.heads, d.head_dim, at);
    core->backward(dq, dk, dv, d_per_head, cache.per_head.data(), cache.core, cache.q.data(),
                   cache.k.data(), cache.v.data(), attention_shape(d), *positions, layer);
    join_qkv(dqkv, dq, dk, dv, d.batch, d.seq, d.heads, d.head_dim, at);
  }
  // qkv = x Wqkvᵀ + bqkv: dx = dqkv Wqkv, dWqkv += dqkvᵀ x.
  linear_backward(dx, grads.qkv_weight, grads.qkv_bias, dqkv, x, w.qkv_weight, N, C, 3 * W, times,
                  at);
  report<T>(done, grads.qkv_weight, 3 * W * C, grads.qkv_bias, 3 * W);
}

std::int64_t attention_sublayer_scratch_size(const BlockDims& d) {
  return 8 * d.rows() * d.width();  // dmerged, dper_head, dq, dk, dv, dqkv (3)
}

template <TrainElement T>
void mlp_sublayer_forward(T* y, MlpCache<T>& cache, const T* x, const MlpWeights<const T>& w,
                          const BlockDims& d, LayerTimes* times, const kernels::Place& at) {
  const std::int64_t N = d.rows(), F = d.mlp_hidden, C = d.dim;
  linear_forward(sized(cache.pre, N * F, at), x, w.fc_weight, w.fc_bias, N, C, F, times, at);
  {
    ScopedLayerTimer timer(times, "gelu");
    kernels::gelu_forward(at, sized(cache.act, N * F, at), static_cast<const T*>(cache.pre.data()),
                          N * F);
  }
  linear_forward(y, cache.act.data(), w.proj_weight, w.proj_bias, N, F, C, times, at);
}

template <TrainElement T>
void mlp_sublayer_backward(T* dx, const MlpWeights<T>& grads, const T* dy, const T* x,
                           const MlpCache<T>& cache, const MlpWeights<const T>& w,
                           const BlockDims& d, T* scratch, LayerTimes* times,
                           const GradFinal<T>& done, const kernels::Place& at) {
  const std::int64_t N = d.rows(), F = d.mlp_hidden, C = d.dim;
  T* d_act = scratch;
  // y = act Wpᵀ + bp  ⇒  dact = dy Wp.
  linear_backward(d_act, grads.proj_weight, grads.proj_bias, dy, cache.act.data(), w.proj_weight, N,
                  F, C, times, at);
  report<T>(done, grads.proj_weight, C * F, grads.proj_bias, C);
  {
    // act = GELU(pre) element-wise  ⇒  dpre = dact ∘ GELU'(pre) (in place).
    ScopedLayerTimer timer(times, "gelu");
    kernels::gelu_backward(at, d_act, cache.pre.data(), static_cast<const T*>(d_act), N * F);
  }
  // pre = x Wfcᵀ + bfc  ⇒  dx = dpre Wfc.
  linear_backward(dx, grads.fc_weight, grads.fc_bias, d_act, x, w.fc_weight, N, C, F, times, at);
  report<T>(done, grads.fc_weight, F * C, grads.fc_bias, F);
}

std::int64_t mlp_sublayer_scratch_size(const BlockDims& d) {
  return d.rows() * d.mlp_hidden;
}

template <TrainElement T>
void block_forward(T* x_out, BlockCache<T>& cache, const T* x_in, const BlockWeights<const T>& w,
                   const BlockDims& d, LayerTimes* times, const BlockSeams<T>& at) {
  const std::int64_t N = d.rows(), C = d.dim;
  Seams<T>& seams = at.seams != nullptr ? *at.seams : identity_seams<T>();
  kernels::Vector<T> out(at.place);  // where a seam that changes the row count writes
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_forward(
        at.place, sized(cache.ln1, N * C, at.place), sized(cache.ln1_mean, N, at.place),
        sized(cache.ln1_rstd, N, at.place), x_in, w.ln1_gamma, w.ln1_beta, N, C);
  }
  // enter → sublayer → leave → bias → residual: the projection's bias is
  // added after leave, so a row-parallel rank adds it once, after the sum.
  auto sublayer = [&](Site site, std::span<const T> in_norm, kernels::Vector<T>& in_buffer, T* to,
                      const T* bias, const T* residual, auto&& run) {
    in_buffer.set_place(at.place);  // the seams resize it: it must be where they write
    const std::span<const T> in = seams.enter(site, at.layer, in_norm, in_buffer);
    const bool new_buffer = !in_buffer.empty() && in.data() == in_buffer.data();
    if (!new_buffer) in_buffer.clear();
    // Gpt::activation_bytes charges what sublayer_input declares: hold the
    // seams to it, so the ledger cannot drift from what the block keeps.
    const SublayerInput declared = seams.sublayer_input(site, d.seq);
    DTW_CHECK_ARG(static_cast<std::int64_t>(in.size()) == d.batch * declared.seq * C &&
                      new_buffer == declared.new_buffer &&
                      (declared.new_buffer || !declared.enter_again),
                  "Seams::enter(" << name_of(site) << ", layer " << at.layer << ") returned "
                                  << in.size() << " values" << (new_buffer ? " in its buffer" : "")
                                  << "; sublayer_input declares " << d.batch * declared.seq * C
                                  << (declared.new_buffer ? " in its buffer" : "")
                                  << (declared.enter_again ? ", entered again in the backward" : ""));
    BlockDims sd = d;
    sd.seq = static_cast<std::int64_t>(in.size()) / (d.batch * C);
    const bool same_rows = sd.rows() == N;
    T* y = same_rows ? to : sized(out, sd.rows() * C, at.place);
    run(y, in.data(), sd);
    // Megatron-SP's saving: the gathered input goes now, and the backward
    // gathers it again from the norm's output, which the block keeps anyway.
    if (declared.enter_again) kernels::Vector<T>(at.place).swap(in_buffer);
    const std::span<const T> added = seams.leave(site, at.layer, {y, static_cast<std::size_t>(sd.rows() * C)}, out);
    DTW_CHECK_ARG(static_cast<std::int64_t>(added.size()) == N * C,
                  "Seams::leave(" << name_of(site) << ", layer " << at.layer << ") returned "
                                  << added.size() << " values; the residual stream holds " << N * C);
    kernels::copy_values(at.place, to, added.data(), N * C);  // nothing when leave wrote in place
    if (bias != nullptr) {
      ScopedLayerTimer timer(times, "bias");
      kernels::bias_add(at.place, to, bias, N, C);
    }
    ScopedLayerTimer timer(times, "residual");
    // Pre-norm residual: the sublayer's output is added to its un-normalised input.
    kernels::add_into(at.place, to, residual, N * C);
  };
  AttentionWeights<const T> attn = w.attn;
  attn.proj_bias = nullptr;
  T* mid = sized(cache.mid, N * C, at.place);
  sublayer(Site::kAttention, {cache.ln1.data(), cache.ln1.size()}, cache.attn_in, mid,
           w.attn.proj_bias, x_in, [&](T* y, const T* in, const BlockDims& sd) {
             // A sublayer that sees more rows than the stream (Megatron-SP's
             // all-gather) sees the whole sequence.
             const TokenRuns whole{{{0, sd.seq}}};
             const TokenRuns* pos = sd.seq == d.seq ? at.positions : &whole;
             attention_sublayer_forward(y, cache.attn, in, attn, sd, times, &seams.attention(), pos,
                                        at.layer, at.place);
           });
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_forward(at.place, sized(cache.ln2, N * C, at.place),
                               sized(cache.ln2_mean, N, at.place),
                               sized(cache.ln2_rstd, N, at.place), static_cast<const T*>(mid),
                               w.ln2_gamma, w.ln2_beta, N, C);
  }
  MlpWeights<const T> mlp = w.mlp;
  mlp.proj_bias = nullptr;
  sublayer(Site::kMlp, {cache.ln2.data(), cache.ln2.size()}, cache.mlp_in, x_out, w.mlp.proj_bias,
           mid, [&](T* y, const T* in, const BlockDims& sd) {
             mlp_sublayer_forward(y, cache.mlp, in, mlp, sd, times, at.place);
           });
}

template <TrainElement T>
void block_backward(T* dx_in, const BlockWeights<T>& grads, const T* dx_out, const T* x_in,
                    const BlockCache<T>& cache, const BlockWeights<const T>& w, const BlockDims& d,
                    T* scratch, LayerTimes* times, const GradFinal<T>& done,
                    const BlockSeams<T>& at) {
  const std::int64_t N = d.rows(), C = d.dim;
  Seams<T>& seams = at.seams != nullptr ? *at.seams : identity_seams<T>();
  T* d_ln = scratch;             // gradient at a layer norm's output
  T* d_mid = scratch + N * C;    // gradient at mid
  T* sub = scratch + 2 * N * C;  // the sublayers' scratch
  // for seams that change the row count, and the input when the seams enter again
  kernels::Vector<T> dy_buffer(at.place), dx_buffer(at.place), big(at.place), again(at.place);
  // The backward of leave → sublayer → enter, from the gradient at the
  // residual (dy) to the gradient at the norm's output (into d_ln). The
  // bias, added after leave, takes its gradient from dy and is final first.
  auto sublayer = [&](Site site, const T* dy, T* bias_grad, const kernels::Vector<T>& in_buffer,
                      const kernels::Vector<T>& in_norm, auto&& run) {
    if (bias_grad != nullptr) {
      ScopedLayerTimer timer(times, "bias");
      kernels::bias_backward(at.place, bias_grad, dy, N, C);
    }
    if (done && bias_grad != nullptr) done(bias_grad, C);
    const std::span<const T> dsub =
        seams.leave_backward(site, at.layer, {dy, static_cast<std::size_t>(N * C)}, dy_buffer);
    const T* in = in_buffer.empty() ? in_norm.data() : in_buffer.data();
    const SublayerInput declared = seams.sublayer_input(site, d.seq);
    if (declared.enter_again) {
      // Only the weights' gradients read the input (dW += dyᵀ x); Megatron
      // overlaps this gather with the input gradient's product.
      const std::span<const T> x = seams.enter(site, at.layer, in_norm, again);
      DTW_CHECK_ARG(static_cast<std::int64_t>(x.size()) == d.batch * declared.seq * C,
                    "Seams::enter(" << name_of(site) << ", layer " << at.layer
                                    << ") entered again in the backward returned " << x.size()
                                    << " values; sublayer_input declares "
                                    << d.batch * declared.seq * C);
      in = x.data();
    }
    BlockDims sd = d;
    sd.seq = static_cast<std::int64_t>(dsub.size()) / (d.batch * C);
    const bool same_rows = sd.rows() == N;
    T* sub_scratch = same_rows ? sub : sized(big, block_scratch_size(sd), at.place);
    T* dx = same_rows ? d_ln : sized(dx_buffer, sd.rows() * C, at.place);
    run(dx, dsub.data(), in, sd, sub_scratch);
    const std::span<const T> dnorm =
        seams.enter_backward(site, at.layer, {dx, static_cast<std::size_t>(sd.rows() * C)}, dx_buffer);
    DTW_CHECK_ARG(static_cast<std::int64_t>(dnorm.size()) == N * C,
                  "Seams::enter_backward(" << name_of(site) << ", layer " << at.layer
                                           << ") returned " << dnorm.size()
                                           << " values; the norm's output holds " << N * C);
    kernels::copy_values(at.place, d_ln, dnorm.data(), N * C);  // nothing when in place
  };
  // x_out = mid + mlp(LN2(mid))  ⇒  dmid = dx_out + LN2ᵀ(mlpᵀ(dx_out)): the
  // residual passes the gradient through unchanged and the branch adds its own.
  // Each gradient is reported the moment it is final, so a listener (DDP's
  // buckets) can send it while the rest of the block still computes.
  MlpWeights<const T> mlp = w.mlp;
  mlp.proj_bias = nullptr;
  MlpWeights<T> gmlp = grads.mlp;
  gmlp.proj_bias = nullptr;
  sublayer(Site::kMlp, dx_out, grads.mlp.proj_bias, cache.mlp_in, cache.ln2,
           [&](T* dx, const T* dy, const T* in, const BlockDims& sd, T* s) {
             mlp_sublayer_backward(dx, gmlp, dy, in, cache.mlp, mlp, sd, s, times, done, at.place);
           });
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_backward(at.place, d_mid, grads.ln2_gamma, grads.ln2_beta,
                                static_cast<const T*>(d_ln), cache.mid.data(),
                                cache.ln2_mean.data(), cache.ln2_rstd.data(), w.ln2_gamma, N, C);
  }
  report<T>(done, grads.ln2_gamma, C, grads.ln2_beta, C);  // β after γ in the buffer
  {
    ScopedLayerTimer timer(times, "residual");
    kernels::add_into(at.place, d_mid, dx_out, N * C);
  }
  // mid = x_in + attention(LN1(x_in))  ⇒  dx_in = dmid + LN1ᵀ(attentionᵀ(dmid)).
  // dx_out is not read after this point, so dx_in may share its memory.
  AttentionWeights<const T> attn = w.attn;
  attn.proj_bias = nullptr;
  AttentionWeights<T> gattn = grads.attn;
  gattn.proj_bias = nullptr;
  sublayer(Site::kAttention, d_mid, grads.attn.proj_bias, cache.attn_in, cache.ln1,
           [&](T* dx, const T* dy, const T* in, const BlockDims& sd, T* s) {
             const TokenRuns whole{{{0, sd.seq}}};
             const TokenRuns* pos = sd.seq == d.seq ? at.positions : &whole;
             attention_sublayer_backward(dx, gattn, dy, in, cache.attn, attn, sd, s, times, done,
                                         &seams.attention(), pos, at.layer, at.place);
           });
  {
    ScopedLayerTimer timer(times, "layernorm");
    kernels::layernorm_backward(at.place, dx_in, grads.ln1_gamma, grads.ln1_beta,
                                static_cast<const T*>(d_ln), x_in, cache.ln1_mean.data(),
                                cache.ln1_rstd.data(), w.ln1_gamma, N, C);
  }
  report<T>(done, grads.ln1_gamma, C, grads.ln1_beta, C);
  ScopedLayerTimer timer(times, "residual");
  kernels::add_into(at.place, dx_in, static_cast<const T*>(d_mid), N * C);
}

std::int64_t block_scratch_size(const BlockDims& d) {
  return 2 * d.rows() * d.dim +
         std::max(attention_sublayer_scratch_size(d), mlp_sublayer_scratch_size(d));
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void attention_sublayer_forward<T>(                                                   \
      T*, AttentionCache<T>&, const T*, const AttentionWeights<const T>&, const BlockDims&,      \
      LayerTimes*, AttentionCore<T>*, const TokenRuns*, int, const kernels::Place&);             \
  template void attention_sublayer_backward<T>(                                                  \
      T*, const AttentionWeights<T>&, const T*, const T*, const AttentionCache<T>&,              \
      const AttentionWeights<const T>&, const BlockDims&, T*, LayerTimes*, const GradFinal<T>&,  \
      AttentionCore<T>*, const TokenRuns*, int, const kernels::Place&);                          \
  template void mlp_sublayer_forward<T>(T*, MlpCache<T>&, const T*, const MlpWeights<const T>&,  \
                                        const BlockDims&, LayerTimes*, const kernels::Place&);   \
  template void mlp_sublayer_backward<T>(T*, const MlpWeights<T>&, const T*, const T*,           \
                                         const MlpCache<T>&, const MlpWeights<const T>&,         \
                                         const BlockDims&, T*, LayerTimes*, const GradFinal<T>&, \
                                         const kernels::Place&);                                 \
  template void block_forward<T>(T*, BlockCache<T>&, const T*, const BlockWeights<const T>&,     \
                                 const BlockDims&, LayerTimes*, const BlockSeams<T>&);           \
  template void block_backward<T>(T*, const BlockWeights<T>&, const T*, const T*,                \
                                  const BlockCache<T>&, const BlockWeights<const T>&,            \
                                  const BlockDims&, T*, LayerTimes*, const GradFinal<T>&,        \
                                  const BlockSeams<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
