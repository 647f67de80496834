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
  DTW_TODO("06.2: The rank's equal part of a dimension that t divides.");
}

model::IndexRange vocab_slice(std::int64_t vocab, int r, int t) {
  DTW_CHECK_ARG(t >= 1 && r >= 0 && r < t, "rank " << r << ": not a rank of a tensor-parallel "
                                                   << "group of " << t);
  DTW_CHECK_ARG(vocab >= t, "rank " << r << ": a vocabulary of " << vocab
                                    << " rows cannot give each of t = " << t << " ranks a row");
  DTW_TODO("06.5: The rank's rows of a vocabulary that may not divide: as even as possible, no padding.");
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
  DTW_TODO("06.1: f forward: what must happen to the input of a tensor-parallel region?");
}

template <TrainElement T>
void f_backward(Comm& group, std::span<T> dx) {
  DTW_TODO("06.1: f backward: turn each rank's partial input gradient into the whole one.");
}

template <TrainElement T>
void g_forward(Comm& group, std::span<T> y) {
  DTW_TODO("06.1: g forward: turn each rank's partial output into the whole output.");
}

template <TrainElement T>
void g_backward(Comm& group, std::span<const T> dy) {
  DTW_TODO("06.1: g backward: what is the gradient of each term of a sum?");
}

// The seams put the operators where the GPT calls them (the contract in
// tensor_parallel.h says when the model calls each). This is the code `dtw
// train --strategy tp` runs: the model's blocks call these four around every
// sublayer, and at the embedding and the head.
template <TrainElement T>
std::span<const T> MegatronSeams<T>::enter(model::Site, int, std::span<const T> x,
                                           kernels::Vector<T>&) {
  DTW_TODO("06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).");
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::leave(model::Site, int, std::span<T> y, kernels::Vector<T>&) {
  DTW_TODO("06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).");
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::leave_backward(model::Site, int, std::span<const T> dy,
                                                    kernels::Vector<T>&) {
  DTW_TODO("06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).");
}
template <TrainElement T>
std::span<const T> MegatronSeams<T>::enter_backward(model::Site, int, std::span<T> dx,
                                                    kernels::Vector<T>&) {
  DTW_TODO("06.1: MegatronSeams: f and g where the GPT calls them (the code that trains).");
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
