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
  DTW_TODO("07.2: Pack block j = heads of rank j of every batch row; all-to-all; lay rank i's tokens at [i·t, (i+1)·t).");
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
  DTW_TODO("07.2: The inverse: send rank j its tokens of my heads; put rank i's heads back at [i·H/p, (i+1)·H/p).");
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
  DTW_TODO("07.2: Forward: q, k, v to the head side, attention on the local heads, the output back; keep what backward needs.");
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
  DTW_TODO("07.2: Backward: dout to the head side, attention's backward on the local heads, dq, dk, dv back.");
}

template <TrainElement T>
std::int64_t UlyssesAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return 4 * s.batch * s.heads * s.q_len * s.head_dim + s.batch * s.heads * s.q_len;
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;

}  // namespace dtw::ch07
