// The executor's compute actions: F and B of (chunk, micro-batch), and with
// activation checkpointing the recompute before B (executor.cpp runs the
// list and moves the messages).
//
// Every micro-batch's backward adds weight × its gradient (weight = its rows
// / the batch), so after the last one the gradients are those of the whole
// batch's mean loss, as the reference computes them.
//
// Checkpointing trades compute for memory: a forward keeps only the
// micro-batch's input (and a copy of the output for its send) and releases
// the pass's activations; the backward runs the forward once more from that
// input to get them back. Without it a stage holds the activations of every
// micro-batch in flight (GPipe: all m of them at the flush).
#include <utility>

#include "dtw/errors.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

// The forward, written out as the model for the rest: a pass from the
// pool runs the chunk's units on the micro-batch, from the received input
// (chunk 0 reads the batch's tokens), inside a timeline phase that names
// the chunk, the micro-batch and the FLOPs; the last chunk's pass returns
// the micro-batch's mean loss, which enters the step's loss with the
// micro-batch's weight (its share of the batch's rows).
template <TrainElement T>
void Executor<T>::State::forward(const Action& a, Slot& slot) {
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  DTW_CHECK_ARG(a.chunk == 0 || slot.input.size() > 0,
                "rank " << this->rank << ": " << to_string(a) << " before its input arrived");
  slot.pass = take_pass();
  {
    const train::Cost c = this->replica.pass_cost(range, batch, false);
    auto phase = this->run.phase(
        "forward", {.stage = a.chunk, .micro_batch = a.mb, .flops = c.flops, .bytes = c.bytes});
    const T mb_loss = slot.pass->forward(range, batch, slot.input.span());
    if (a.chunk == this->map.chunk_count() - 1) this->loss += batch.weight * static_cast<double>(mb_loss);
  }
  slot.forwarded = true;
  if (!this->options.checkpoint) {
    slot.input = Array<T>();  // the pass keeps its own copy of the input
    return;
  }
  DTW_TODO("05.5: Checkpointing: keep only the input, copy the output for its send, and release the pass's activations.");
}

template <TrainElement T>
void Executor<T>::State::backward(const Action& a, Slot& slot) {
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  const bool last = a.chunk == this->map.chunk_count() - 1;
  DTW_CHECK_ARG(slot.forwarded && (last || slot.dy.size() > 0),
                "rank " << this->rank << ": " << to_string(a) << " before its "
                        << (slot.forwarded ? "output gradient arrived" : "forward"));
  // A forward's work, and a backward's: twice the forward's (pass_cost with
  // backward counts both, three times the forward).
  const train::Cost fwd = this->replica.pass_cost(range, batch, false);
  if (this->options.checkpoint) {
    DTW_TODO("05.5: Recompute: run the chunk's forward again from the kept input before the backward.");
  }
  collect(false, a.chunk, a.mb);  // its activation has arrived; free what its send kept
  DTW_TODO("05.3: Backward the micro-batch from its output's gradient, weighted by its share of the batch.");
  slot.backwarded = true;
  if (a.chunk == 0) give_back(std::move(slot.pass));  // no gradient to send
}

// executor.cpp's step() calls these for the two element types.
template void Executor<float>::State::forward(const Action&, Slot&);
template void Executor<double>::State::forward(const Action&, Slot&);
template void Executor<float>::State::backward(const Action&, Slot&);
template void Executor<double>::State::backward(const Action&, Slot&);

}  // namespace dtw::ch05
