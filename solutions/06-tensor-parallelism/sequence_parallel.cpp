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
  // @lab 06.6: All-gather along the sequence: every rank's token range into the whole sequence.
  // @hint 1: Each rank holds its own stretch of every sequence; every rank needs all of them,
  // @hint 1: each in its place in its sequence.
  // @hint 2: One allgather of the local values into a buffer of t·|local| (rank-ordered
  // @hint 2: blocks [q][b][i]); then copy block (q, b) -- l·dim values -- to the rows
  // @hint 2: b·seq + q·l of whole. The trap: with batch > 1 a rank's block is not contiguous
  // @hint 2: in the whole.
  // @hint 3: kernels::Vector<T> all(group.exec().place()); all.resize(t·local.size());
  // @hint 3: ch01::allgather(group, local, std::span<T>(all)); kernels::copy_values(place,
  // @hint 3: whole + (b·seq + q·l)·dim, all + (q·batch + b)·l·dim, l·dim) -- on the rank's
  // @hint 3: Place (the host, or its GPU), never std::copy.
  const int t = group.size();
  const std::int64_t l = seq / t, block = l * dim;
  const kernels::Place place = group.exec().place();
  kernels::Vector<T> all(place);
  all.resize(static_cast<std::size_t>(t) * local.size());
  ch01::allgather(group, local, std::span<T>(all));
  for (int q = 0; q < t; ++q)
    for (std::int64_t b = 0; b < batch; ++b)
      kernels::copy_values(place, whole.data() + (b * seq + q * l) * dim, static_cast<const T*>(all.data() + (q * batch + b) * block), block);
  // @end
}

template <TrainElement T>
void sequence_reduce_scatter(Comm& group, std::span<T> local, std::span<T> whole,
                             std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  check_sequence(group, seq);
  check_sizes(group, "sequence_reduce_scatter", whole.size(), local.size(), batch, seq, dim);
  // @lab 06.6: Reduce-scatter along the sequence: the sum of the rank's own tokens.
  // @hint 1: Every rank holds a partial sum of every token; each rank keeps the full sum of
  // @hint 1: its own tokens only.
  // @hint 2: Reorder whole from [b][q][i] (sequence-major) to rank-ordered blocks [q][b][i],
  // @hint 2: then one reduce-scatter (sum) leaves block rank() -- the rank's tokens of every
  // @hint 2: sequence, [b][i] -- in local.
  // @hint 3: kernels::Vector<T> blocks(group.exec().place()); blocks.resize(whole.size());
  // @hint 3: kernels::copy_values(place, blocks + (q·batch + b)·l·dim, whole + (b·seq +
  // @hint 3: q·l)·dim, l·dim); ch01::reduce_scatter(group, std::span<T>(blocks), local,
  // @hint 3: ReduceOp::kSum).
  const int t = group.size();
  const std::int64_t l = seq / t, block = l * dim;
  const kernels::Place place = group.exec().place();
  kernels::Vector<T> blocks(place);
  blocks.resize(whole.size());
  for (int q = 0; q < t; ++q)
    for (std::int64_t b = 0; b < batch; ++b)
      kernels::copy_values(place, blocks.data() + (q * batch + b) * block, static_cast<const T*>(whole.data() + (b * seq + q * l) * dim), block);
  ch01::reduce_scatter(group, std::span<T>(blocks), local, ReduceOp::kSum);
  // @end
}

template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::enter(model::Site site, int, std::span<const T> x,
                                                   kernels::Vector<T>& buffer) {
  // @lab 06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.
  // @hint 1: enter: between the sublayers each rank holds only its stretch of every sequence.
  // @hint 1: Wherever Megatron's f stood (06.1), the cut matrices after it need every token:
  // @hint 1: f becomes an all-gather along the sequence.
  // @hint 2: At a block's sublayer and at the head (the logits of every token, on the rank's
  // @hint 2: vocabulary slice): size buffer to the whole activations (batch·seq·dim),
  // @hint 2: all-gather x into it along the sequence, return it. At the embedding return x.
  // @hint 3: in_a_block(site) || site == model::Site::kHead; buffer.resize;
  // @hint 3: sequence_allgather(group_, whole, local, batch_, seq_, dim_) with the buffer as the
  // @hint 3: whole.
  if (!in_a_block(site) && site != model::Site::kHead) return x;
  buffer.resize(static_cast<std::size_t>(batch_ * seq_ * dim_));
  sequence_allgather(group_, std::span<T>(buffer), x, batch_, seq_, dim_);
  return buffer;
  // @end
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::leave(model::Site site, int, std::span<T> y,
                                                   kernels::Vector<T>& buffer) {
  // @lab 06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.
  // @hint 1: leave: wherever Megatron's g stood (after a sublayer, and after the vocabulary
  // @hint 1: slices' lookups), tensor parallelism would sum the partial outputs on every rank;
  // @hint 1: with the sequence cut, each rank needs the sum of its own tokens only.
  // @hint 2: At a block's sublayer and at the embedding: buffer gets 1/t of y, the
  // @hint 2: reduce-scatter along the sequence fills it, return it. At the head return y.
  // @hint 3: in_a_block(site) || site == model::Site::kEmbedding; buffer.resize;
  // @hint 3: sequence_reduce_scatter(group_, local, whole, batch_, seq_, dim_) with the buffer
  // @hint 3: as the local part and y as the whole.
  if (!in_a_block(site) && site != model::Site::kEmbedding) return y;
  buffer.resize(y.size() / static_cast<std::size_t>(group_.size()));
  sequence_reduce_scatter(group_, std::span<T>(buffer), y, batch_, seq_, dim_);
  return buffer;
  // @end
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::leave_backward(model::Site site, int,
                                                            std::span<const T> dy,
                                                            kernels::Vector<T>& buffer) {
  // @lab 06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.
  // @hint 1: leave_backward: the gradient arrives cut like leave's output: the rank's tokens
  // @hint 1: only. What came before leave (a sublayer, the vocabulary lookup) needs every
  // @hint 1: token's.
  // @hint 2: The mirror of leave: where leave reduce-scatters, all-gather dy along the
  // @hint 2: sequence into buffer (batch·seq·dim) and return it; elsewhere return dy.
  // @hint 3: in_a_block(site) || site == model::Site::kEmbedding; buffer.resize;
  // @hint 3: sequence_allgather(group_, whole, local, batch_, seq_, dim_) with dy as the local
  // @hint 3: part.
  if (!in_a_block(site) && site != model::Site::kEmbedding) return dy;
  buffer.resize(static_cast<std::size_t>(batch_ * seq_ * dim_));
  sequence_allgather(group_, std::span<T>(buffer), dy, batch_, seq_, dim_);
  return buffer;
  // @end
}
template <TrainElement T>
std::span<const T> SequenceParallelSeams<T>::enter_backward(model::Site site, int, std::span<T> dx,
                                                            kernels::Vector<T>& buffer) {
  // @lab 06.6: SequenceParallelSeams: the sequence collectives where the GPT calls them.
  // @hint 1: enter_backward: each rank's input gradient is partial (its heads, hidden units
  // @hint 1: or vocabulary columns only) and covers every token; the rank keeps the whole sum
  // @hint 1: of its own tokens.
  // @hint 2: The mirror of enter: where enter all-gathers, reduce-scatter dx along the
  // @hint 2: sequence into buffer (1/t of dx) and return it; elsewhere return dx.
  // @hint 3: in_a_block(site) || site == model::Site::kHead; buffer.resize;
  // @hint 3: sequence_reduce_scatter(group_, local, whole, batch_, seq_, dim_) with dx as the
  // @hint 3: whole (scratch afterwards).
  if (!in_a_block(site) && site != model::Site::kHead) return dx;
  buffer.resize(dx.size() / static_cast<std::size_t>(group_.size()));
  sequence_reduce_scatter(group_, std::span<T>(buffer), dx, batch_, seq_, dim_);
  return buffer;
  // @end
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
  // @lab 06.6: Sum the replicated tensors' gradients over the group, in one allreduce.
  // @hint 1: With the sequence cut, each copy of a norm (or of any tensor every rank holds
  // @hint 1: whole) saw only this rank's tokens: its gradient is a partial sum.
  // @hint 2: Size buffer to the replicated tensors' total; copy each one's gradients into it,
  // @hint 2: one after another; sum buffer over the group; copy the sums back, tensor by
  // @hint 2: tensor, in the same order. The gradients may be on a GPU: copy with the kernel on
  // @hint 2: the rank's Place, never with std::copy.
  // @hint 3: replica.plan().replicated.tensors (the names); replica.tensor(name).grads;
  // @hint 3: buffer.resize(total); kernels::copy_values(group.exec().place(), dst, src, n) to
  // @hint 3: pack and to unpack, an offset moving along buffer; ch01::allreduce(group,
  // @hint 3: std::span<T>(buffer), ReduceOp::kSum, ch01::AllreduceAlgo::kRing).
  const train::Replication& replicated = replica.plan().replicated;
  const kernels::Place place = group.exec().place();
  std::size_t total = 0;
  for (const std::string& name : replicated.tensors) total += replica.tensor(name).grads.size();
  buffer.resize(total);
  std::size_t packed = 0;
  for (const std::string& name : replicated.tensors) {
    const std::span<T> g = replica.tensor(name).grads;
    kernels::copy_values(place, buffer.data() + packed, static_cast<const T*>(g.data()),
                         static_cast<std::int64_t>(g.size()));
    packed += g.size();
  }
  ch01::allreduce(group, std::span<T>(buffer), ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  std::size_t at = 0;
  for (const std::string& name : replicated.tensors) {
    const std::span<T> g = replica.tensor(name).grads;
    kernels::copy_values(place, g.data(), static_cast<const T*>(buffer.data() + at),
                         static_cast<std::int64_t>(g.size()));
    at += g.size();
  }
  // @end
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
