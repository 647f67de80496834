// Megatron sequence parallelism (SP): between the tensor-parallel sublayers the activations are
// not repeated on every rank but cut along the sequence.
//
//   rank r holds tokens [r·T/t, (r+1)·T/t) of every sequence:
//
//   x_r ─ LN ─ allgather ─► whole seq ─ sublayer on its heads/hidden units ─► partial
//                                                                              │
//   x_r + ◄───────────────────── reduce-scatter (sum, keep my tokens) ◄───────┘
//
// Tensor parallelism alone ends each sublayer with an allreduce, and then every rank runs the
// same LayerNorm, dropout and residual add on the same whole activations: t copies of the same
// work and memory. An allreduce is a reduce-scatter followed by an allgather; SP stops half way:
// the reduce-scatter leaves each rank the sum of its own tokens, the norm and the residual run on
// T/t tokens, and the allgather happens before the next sublayer, which needs the whole sequence.
// Same bytes as the allreduce, activations between sublayers divided by t. Backward the two swap:
// an allgather of the gradient at the sublayer's output, a reduce-scatter of the sublayer's
// partial input gradient; and the sublayer's input, which the block did not keep, is gathered
// again by a second call of enter.
//
// The model's ends follow the same rule, f becomes an allgather and g a reduce-scatter wherever
// they stood: each rank looks up the whole sequence's tokens in its vocabulary slice (partial
// rows, summed by g under tp), and the embedding's reduce-scatter leaves it the sum of its own
// tokens; before the logits the head gathers the stream back, and the loss takes its two
// vocabulary reductions over every token (06.5). So the residual stream is cut end to end, and
// every rank's loss is the batch's.
//
// The price: the norms (and the biases added after the reduce-scatter) now see only the rank's
// tokens, so their gradients are partial sums. They must be summed over the group before the
// optimizer step, or the replicated copies drift apart (NVIDIA/Megatron-LM#1446, EleutherAI/gpt-
// neox#1257).
//
// Rows are sequence-major, row b·T + s: the rank's tokens are one block per sequence, not one
// block in all, so the collectives' rank-ordered blocks are reordered from [rank][b][token] to
// [b][rank][token] and back.
#include <algorithm>

#include "collectives.h"
#include "dtw/kernels/permute.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {
bool in_a_block(model::Site site) {
  return site == model::Site::kAttention || site == model::Site::kMlp;
}
void check_sequence(const Comm& group, std::int64_t seq) {
  DTW_CHECK_ARG(seq % group.size() == 0,
                "rank " << group.rank() << ": a sequence of " << seq
                        << " tokens does not split over t = " << group.size() << " ranks");
}
// Machinery: the two buffers' sizes, checked before the learner's code runs
// on them (a wrong size would otherwise run off a buffer).
void check_sizes(const Comm& group, const char* what, std::size_t whole, std::size_t local,
                 std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  const auto w = static_cast<std::size_t>(batch * seq * dim),
             l = w / static_cast<std::size_t>(group.size());
  DTW_CHECK_ARG(whole == w && local == l,
                "rank " << group.rank() << ": " << what << " over batch " << batch << ", seq "
                        << seq << ", dim " << dim << ", t = " << group.size()
                        << ": expected the whole " << w << " values and the local " << l
                        << ", got whole " << whole << " and local " << local);
}
}  // namespace

template <TrainElement T>
void sequence_allgather(Comm& group, std::span<T> whole, std::span<const T> local,
                        std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  check_sequence(group, seq);
  check_sizes(group, "sequence_allgather", whole.size(), local.size(), batch, seq, dim);
  DTW_TODO("06.6: All-gather along the sequence: every rank's token range into the whole sequence.");
}

template <TrainElement T>
void sequence_reduce_scatter(Comm& group, std::span<T> local, std::span<T> whole,
                             std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  check_sequence(group, seq);
  check_sizes(group, "sequence_reduce_scatter", whole.size(), local.size(), batch, seq, dim);
  DTW_TODO("06.6: Reduce-scatter along the sequence: the sum of the rank's own tokens.");
}

template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::enter(model::Site site, int, std::span<const T> x,
                                                   kernels::Vector<T>& buffer) {
  DTW_TODO("06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.");
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::leave(model::Site site, int, std::span<T> y,
                                                   kernels::Vector<T>& buffer) {
  DTW_TODO("06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.");
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::leave_backward(model::Site site, int,
                                                            std::span<const T> dy,
                                                            kernels::Vector<T>& buffer) {
  DTW_TODO("06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.");
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::enter_backward(model::Site site, int, std::span<T> dx,
                                                            kernels::Vector<T>& buffer) {
  DTW_TODO("06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.");
}

// Machinery for the ledger and the model: the stream between the ends
// holds the rank's seq/t tokens of every sequence (the shard says which,
// ModelShard::cut_by_seams); enter's all-gather hands each sublayer and the
// head the whole sequence in a new buffer. As in Megatron, the model does
// not keep it: it keeps the rank's norm output (1/t of it) and calls enter
// again in the backward, one more all-gather for activations that divide
// by t.
template <TrainElement T>
model::SublayerInput SequenceParallelSeams<T>::sublayer_input(model::Site site,
                                                              std::int64_t seq) const {
  if (!in_a_block(site) && site != model::Site::kHead) return {seq, false};
  return {.seq = seq * group_.size(), .new_buffer = true, .enter_again = true};
}

template <TrainElement T>
void reduce_replicated_grads(Comm& group, train::Replica<T>& replica, kernels::Vector<T>& buffer) {
  DTW_TODO("06.6: Sum the replicated tensors' gradients over the group, in one allreduce.");
}

#define DTW_CH06_SP(T)                                                                         \
  template void sequence_allgather<T>(Comm&, std::span<T>, std::span<const T>, std::int64_t,   \
                                      std::int64_t, std::int64_t);                             \
  template void sequence_reduce_scatter<T>(Comm&, std::span<T>, std::span<T>, std::int64_t,    \
                                           std::int64_t, std::int64_t);                        \
  template class SequenceParallelSeams<T>;                                                     \
  template void reduce_replicated_grads<T>(Comm&, train::Replica<T>&, kernels::Vector<T>&);
DTW_CH06_SP(float)
DTW_CH06_SP(double)

}  // namespace dtw::ch06
