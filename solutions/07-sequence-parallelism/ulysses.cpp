// DeepSpeed-Ulysses: trade the sequence for the heads. Attention mixes
// tokens but never heads, so a rank that holds *every token of a few heads*
// can run ordinary attention on them. Two all-to-alls make that so:
//
//     sequence side, rank r: [B, H, t, D]      all heads, tokens of rank r (t = T/p)
//              │ all-to-all: block j = heads [j·H/p, (j+1)·H/p) of my tokens → rank j
//     head side, rank r:     [B, H/p, T, D]    heads of rank r, every rank's tokens
//              │ attention on the local heads over the whole sequence
//              │ all-to-all back: block j = tokens of rank j of my heads → rank j
//     sequence side:         [B, H, t, D]
//
// Forward: q, k, v over (3 all-to-alls), the output back (1). Backward: dout
// over (1), dq, dk, dv back (3). Each all-to-all sends (p−1)/p of a tensor of
// n = B·H·t·D elements, so a layer costs 8·(p−1)/p·n elements per rank:
// about 8·B·T·C/p, falling with p -- on a network where every pair of ranks
// has its own link. The limit: a rank must get whole heads, so H % p == 0.
//
// The block for rank j is NOT a contiguous slice of x when B > 1: the heads
// of one batch row sit between those of the next. Packing it as one slice
// ("reshape [B, H, t, D] to [p, ...]") swaps batch and head axes, which is
// right only for B = 1 -- the bug DeepSpeed shipped (deepspeedai/DeepSpeed#5808).
#include <vector>

#include "collectives.h"  // chapter 01's alltoall (DEPENDS 01)
#include "sequence_parallelism.h"

namespace dtw::ch07 {

template <TrainElement T>
UlyssesAttention<T>::UlyssesAttention(CoreSetup setup) : setup_(setup) {}

template <TrainElement T>
std::vector<T> UlyssesAttention<T>::to_heads(const T* x, const kernels::AttentionShape& shape) {
  Comm& comm = *setup_.comm;
  const int p = comm.size();
  const std::int64_t B = shape.batch, H = shape.heads, t = shape.q_len, D = shape.head_dim;
  const std::int64_t Hl = H / p, n = B * H * t * D, row = t * D;  // row: one head's tokens
  std::vector<T> send(static_cast<std::size_t>(n)), recv(send.size()), heads(send.size());
  ++tally_.all_to_alls;
  // @lab 07.2: Pack block j = heads of rank j of every batch row; all-to-all; lay rank i's tokens at [i·t, (i+1)·t).
  // @hint 1: Rank j must receive, from every rank, the heads it will own, for every sequence of
  // @hint 1: the batch; what arrives from rank i are rank i's tokens, which go after those of
  // @hint 1: ranks 0..i−1 in the whole sequence.
  // @hint 2: Send block j is [B, H/p, t, D]: for b, for h in [j·H/p, (j+1)·H/p) copy the t·D values
  // @hint 2: of x[b, h]. Received block i is [B, H/p, t, D] too; its (b, h) row goes to
  // @hint 2: heads[b, h, i·t .. (i+1)·t). Trap: with B > 1 block j is not one slice of x.
  // @hint 3: ch01::alltoall(comm, std::span<const T>(send), std::span<T>(recv)); std::copy_n for
  // @hint 3: the t·D-value rows; block j starts at j·n/p.
  for (int j = 0; j < p; ++j)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hl; ++h)
        std::copy_n(x + ((b * H + j * Hl + h) * t) * D, row,
                    send.data() + j * (n / p) + (b * Hl + h) * row);
  ch01::alltoall(comm, std::span<const T>(send), std::span<T>(recv));
  for (int i = 0; i < p; ++i)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hl; ++h)
        std::copy_n(recv.data() + i * (n / p) + (b * Hl + h) * row, row,
                    heads.data() + ((b * Hl + h) * p * t + i * t) * D);
  // @end
  return heads;
}

template <TrainElement T>
void UlyssesAttention<T>::to_tokens(T* x, const std::vector<T>& x_heads,
                                   const kernels::AttentionShape& shape) {
  Comm& comm = *setup_.comm;
  const int p = comm.size();
  const std::int64_t B = shape.batch, H = shape.heads, t = shape.q_len, D = shape.head_dim;
  const std::int64_t Hl = H / p, n = B * H * t * D, row = t * D;
  std::vector<T> send(static_cast<std::size_t>(n)), recv(send.size());
  ++tally_.all_to_alls;
  // @lab 07.2: The inverse: send rank j its tokens of my heads; put rank i's heads back at [i·H/p, (i+1)·H/p).
  // @hint 1: Undo to_heads: every rank gets back its own tokens, now of every head, and the heads
  // @hint 1: that arrive from rank i are the ones rank i owned.
  // @hint 2: Send block j is [B, H/p, t, D]: tokens [j·t, (j+1)·t) of each local (b, h). Received
  // @hint 2: block i's (b, h) row goes to x[b, i·H/p + h]. Same trap as to_heads with B > 1.
  // @hint 3: ch01::alltoall(comm, std::span<const T>(send), std::span<T>(recv)); std::copy_n.
  for (int j = 0; j < p; ++j)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hl; ++h)
        std::copy_n(x_heads.data() + ((b * Hl + h) * p * t + j * t) * D, row,
                    send.data() + j * (n / p) + (b * Hl + h) * row);
  ch01::alltoall(comm, std::span<const T>(send), std::span<T>(recv));
  for (int i = 0; i < p; ++i)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hl; ++h)
        std::copy_n(recv.data() + i * (n / p) + (b * Hl + h) * row, row,
                    x + ((b * H + i * Hl + h) * t) * D);
  // @end
}

template <TrainElement T>
void UlyssesAttention<T>::forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k,
                                  const T* v, const kernels::AttentionShape& shape,
                                  const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const int p = comm.size();
  check_setup("Ulysses", setup_.seq_len, shape.heads, p, setup_.split, true, comm.rank());
  // The whole sequence as the head side holds it: rank 0's tokens, then rank 1's, ...
  TokenRuns whole;
  for (const TokenRuns& r : runs_of_every_rank(setup_, positions))
    whole.runs.insert(whole.runs.end(), r.runs.begin(), r.runs.end());
  const kernels::AttentionShape local{shape.batch, shape.heads / p, whole.size(), whole.size(),
                                      shape.head_dim};
  const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
  // @lab 07.2: Forward: q, k, v to the head side, attention on the local heads, the output back; keep what backward needs.
  // @hint 1: Move q, k and v to the head side, attend there as one device would on those heads
  // @hint 1: over every token, bring the output back, and keep the head-side tensors and the
  // @hint 1: log-sum-exp for the backward.
  // @hint 2: qh, kh, vh = to_heads(...); oh and lse of the local shape; attend_block over `whole`
  // @hint 2: for queries and keys (count its pairs); to_tokens(out, oh). Keep qh, kh, vh, oh in
  // @hint 2: cache.saved (4·n values) and lse in cache.lse.
  // @hint 3: attend_block(oh.data(), cache.lse.data(), qh.data(), whole, kh.data(), vh.data(),
  // @hint 3: whole, local, setup_.causal); cache.saved.insert(end, qh.begin(), qh.end()), ...
  const std::vector<T> qh = to_heads(q, shape), kh = to_heads(k, shape), vh = to_heads(v, shape);
  std::vector<T> oh(static_cast<std::size_t>(n));
  cache.lse.resize(static_cast<std::size_t>(n / shape.head_dim));
  tally_.pairs += attend_block(oh.data(), cache.lse.data(), qh.data(), whole, kh.data(),
                               vh.data(), whole, local, setup_.causal);
  to_tokens(out, oh, shape);
  cache.saved.clear();
  for (const std::vector<T>* x : {&qh, &kh, &vh, static_cast<const std::vector<T>*>(&oh)})
    cache.saved.insert(cache.saved.end(), x->begin(), x->end());
  // @end
}

template <TrainElement T>
void UlyssesAttention<T>::backward(T* dq, T* dk, T* dv, const T* dout, const T* /*out*/,
                                   const model::CoreCache<T>& cache, const T* /*q*/,
                                   const T* /*k*/, const T* /*v*/,
                                   const kernels::AttentionShape& shape,
                                   const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const int p = comm.size();
  TokenRuns whole;
  for (const TokenRuns& r : runs_of_every_rank(setup_, positions))
    whole.runs.insert(whole.runs.end(), r.runs.begin(), r.runs.end());
  const kernels::AttentionShape local{shape.batch, shape.heads / p, whole.size(), whole.size(),
                                      shape.head_dim};
  const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
  const T* saved = cache.saved.data();  // qh, kh, vh, oh: n values each
  // @lab 07.2: Backward: dout to the head side, attention's backward on the local heads, dq, dk, dv back.
  // @hint 1: The mirror of the forward: the gradient arrives on the sequence side, the saved
  // @hint 1: tensors live on the head side, and the gradients must leave on the sequence side.
  // @hint 2: doh = to_heads(dout); dqh, dkh, dvh zero; attend_block_backward over `whole` with
  // @hint 2: the saved qh, kh, vh, oh and cache.lse; to_tokens each of dq, dk, dv.
  // @hint 3: attend_block_backward(dqh.data(), dkh.data(), dvh.data(), doh.data(), saved + 3 * n,
  // @hint 3: cache.lse.data(), saved, whole, saved + n, saved + 2 * n, whole, local, setup_.causal)
  const std::vector<T> doh = to_heads(dout, shape);
  std::vector<T> dqh(static_cast<std::size_t>(n)), dkh(dqh.size()), dvh(dqh.size());
  attend_block_backward(dqh.data(), dkh.data(), dvh.data(), doh.data(), saved + 3 * n,
                        cache.lse.data(), saved, whole, saved + n, saved + 2 * n, whole, local,
                        setup_.causal);
  to_tokens(dq, dqh, shape);
  to_tokens(dk, dkh, shape);
  to_tokens(dv, dvh, shape);
  // @end
}

template <TrainElement T>
std::int64_t UlyssesAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return 4 * s.batch * s.heads * s.q_len * s.head_dim + s.batch * s.heads * s.q_len;
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;

}  // namespace dtw::ch07
