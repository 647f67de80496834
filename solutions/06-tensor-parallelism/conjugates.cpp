// Megatron's two conjugate operators, and the slices they stand between.
//
// A tensor-parallel region starts with f and ends with g:
//
//              f                                g
//     x ──(identity)──► X W_rᵀ on every rank ──(sum)──► y        forward
//    dx ◄───(sum)────── dY_r W_r  on every rank ◄─(identity)── dy   backward
//
// Forward, every rank already holds the whole input, so f copies nothing;
// each rank's output is a partial sum (its slice of the inner dimension), so
// g adds them: one allreduce. Backward the roles swap: the gradient of a sum
// reaches every term unchanged (g' is the identity), and the input fed every
// rank's slice, so its gradient is the sum of the slices' (f' is the
// allreduce). Each operator moves data in exactly one direction; that is
// why Megatron calls them conjugate.
//
// Bytes per rank: one ring allreduce of n values, 2(t−1)/t·n·e, for g
// forward and for f backward; nothing for the other two.
#include <algorithm>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "tensor_parallel.h"

namespace dtw::ch06 {

model::IndexRange even_slice(std::int64_t extent, int r, int t, const char* what) {
  DTW_CHECK_ARG(t >= 1 && r >= 0 && r < t, "rank " << r << ": not a rank of a tensor-parallel "
                                                   << "group of " << t);
  DTW_CHECK_ARG(extent % t == 0, "rank " << r << ": " << extent << " " << what
                                         << " do not split over t = " << t << " ranks ("
                                         << extent << " % " << t << " = " << extent % t << ")");
  // @lab 06.2: The rank's equal part of a dimension that t divides.
  // @hint 1: t ranks share the heads (or the hidden units) equally, in rank order.
  // @hint 2: Each rank holds extent / t of them; rank r starts after the r ranks before it.
  // @hint 3: return {r * (extent / t), (r + 1) * (extent / t)};
  return {r * (extent / t), (r + 1) * (extent / t)};
  // @end
}

model::IndexRange vocab_slice(std::int64_t vocab, int r, int t) {
  DTW_CHECK_ARG(t >= 1 && r >= 0 && r < t, "rank " << r << ": not a rank of a tensor-parallel "
                                                   << "group of " << t);
  DTW_CHECK_ARG(vocab >= t, "rank " << r << ": a vocabulary of " << vocab
                                    << " rows cannot give each of t = " << t << " ranks a row");
  // @lab 06.5: The rank's rows of a vocabulary that may not divide: as even as possible, no padding.
  // @hint 1: Every row of the vocabulary belongs to exactly one rank, in order, and no rank
  // @hint 1: holds more than one row more than another. Nothing is padded.
  // @hint 2: base = vocab / t rows each; the first vocab % t ranks hold one more. Rank r
  // @hint 2: starts after r·base rows plus one for each earlier rank that holds an extra row.
  // @hint 3: begin = r·base + min(r, extra); end = begin + base + (r < extra ? 1 : 0).
  const std::int64_t base = vocab / t, extra = vocab % t;
  const std::int64_t begin = r * base + std::min<std::int64_t>(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
  // @end
}

model::ModelShard megatron_shard(const model::ModelConfig& config, int r, int t, bool cut_vocab) {
  DTW_CHECK_ARG(config.kind == model::ModelKind::kGpt,
                "rank " << r << ": tensor parallelism cuts a GPT; " << config.name << " is not one");
  model::ModelShard s;
  s.heads = even_slice(config.heads, r, t, "heads");
  s.hidden = even_slice(config.mlp_hidden, r, t, "MLP hidden units");
  if (cut_vocab) s.vocab = vocab_slice(config.vocab, r, t);
  return s;
}

template <TrainElement T>
void f_forward(Comm& group, std::span<const T> x) {
  // @lab 06.1: f forward: what must happen to the input of a tensor-parallel region?
  // @hint 1: Every rank of the group already holds the whole input, the same values. What
  // @hint 1: does the first operator of a region have to send before the column-parallel
  // @hint 1: matrix can multiply it?
  // @hint 2: Nothing: f is the identity forward. Its work is all in its backward pass.
  // @hint 3: An empty body: (void)group; (void)x;
  (void)group;
  (void)x;
  // @end
}

template <TrainElement T>
void f_backward(Comm& group, std::span<T> dx) {
  // @lab 06.1: f backward: turn each rank's partial input gradient into the whole one.
  // @hint 1: The input fed every rank's slice of the weight, so its gradient is the sum of
  // @hint 1: what the slices send back.
  // @hint 2: Sum dx over the group, in place, so every rank ends with the same whole gradient.
  // @hint 3: ch01::allreduce(group, dx, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  ch01::allreduce(group, dx, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  // @end
}

template <TrainElement T>
void g_forward(Comm& group, std::span<T> y) {
  // @lab 06.1: g forward: turn each rank's partial output into the whole output.
  // @hint 1: After a row-parallel product each rank holds its slice's share of every output
  // @hint 1: value; the output is their sum.
  // @hint 2: Sum y over the group, in place: afterwards every rank holds the same whole y.
  // @hint 3: ch01::allreduce(group, y, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  ch01::allreduce(group, y, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  // @end
}

template <TrainElement T>
void g_backward(Comm& group, std::span<const T> dy) {
  // @lab 06.1: g backward: what is the gradient of each term of a sum?
  // @hint 1: y = y_0 + ... + y_{t-1}: how does a change of y_r change y?
  // @hint 2: One for one: g's backward is the identity; every rank already holds the whole dy.
  // @hint 3: An empty body: (void)group; (void)dy;
  (void)group;
  (void)dy;
  // @end
}

// The seams put the operators where the GPT calls them (the contract in
// tensor_parallel.h says when the model calls each). This is the code `dtw
// train --strategy tp` runs: the model's blocks call these four around every
// sublayer, and at the embedding and the head.
template <TrainElement T>
std::span<const T> MegatronSeams<T>::enter(model::Site, int, std::span<const T> x,
                                           kernels::Vector<T>&) {
  // @lab 06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).
  // @hint 1: The model calls enter just before the matrix cut by its output features, with
  // @hint 1: the input that every rank holds whole. Which of the two operators stands there,
  // @hint 1: and what does it do in the forward pass?
  // @hint 2: The region starts with f; f's forward is the identity: no message, and the
  // @hint 2: input goes on unchanged (the buffer is for seams that must copy; not needed).
  // @hint 3: f_forward(group_, x); return x;
  f_forward(group_, x);
  return x;
  // @end
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::leave(model::Site, int, std::span<T> y, kernels::Vector<T>&) {
  // @lab 06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).
  // @hint 1: The model calls leave after the matrix cut by its input features: every rank
  // @hint 1: holds its slice's share of every output value. What turns them into the output?
  // @hint 2: The region ends with g; g's forward sums the partial outputs over the group,
  // @hint 2: in place, and the summed y goes on. The trap: f here leaves every rank its own
  // @hint 2: partial output, and the model trains on it without complaint.
  // @hint 3: g_forward(group_, y); return y;
  g_forward(group_, y);
  return y;
  // @end
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::leave_backward(model::Site, int, std::span<const T> dy,
                                                    kernels::Vector<T>&) {
  // @lab 06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).
  // @hint 1: leave_backward: backward, the model first meets the operator that ended the
  // @hint 1: region forward.
  // @hint 1: What is the gradient of a sum with respect to each of its terms?
  // @hint 2: g's backward is the identity: every rank already holds the whole dy; no message.
  // @hint 3: g_backward(group_, dy); return dy;
  g_backward(group_, dy);
  return dy;
  // @end
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::enter_backward(model::Site, int, std::span<T> dx,
                                                    kernels::Vector<T>&) {
  // @lab 06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).
  // @hint 1: enter_backward: the input fed every rank's slice of the weight; each rank's dx
  // @hint 1: is the gradient through its own slice only. What is the whole input's gradient?
  // @hint 2: f's backward: sum dx over the group, in place, and hand the sum on.
  // @hint 3: f_backward(group_, dx); return dx;
  f_backward(group_, dx);
  return dx;
  // @end
}

#define DTW_CH06_CONJUGATES(T)                            \
  template void f_forward<T>(Comm&, std::span<const T>);        \
  template void f_backward<T>(Comm&, std::span<T>);       \
  template void g_forward<T>(Comm&, std::span<T>);        \
  template void g_backward<T>(Comm&, std::span<const T>);       \
  template class MegatronSeams<T>;
DTW_CH06_CONJUGATES(float)
DTW_CH06_CONJUGATES(double)

}  // namespace dtw::ch06
