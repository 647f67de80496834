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
  // @lab 05.5: Checkpointing: keep only the input, copy the output for its send, and release the pass's activations.
  // @hint 1: slot.input stays as it is (chunk 0 has none: its input is the batch). Unless this is
  // @hint 1: the last chunk, which sends nothing, copy slot.pass->output() into slot.out, an
  // @hint 1: Array<T>(this->comm.exec(), output, MemoryCategory::kCommBuffers). Then
  // @hint 1: slot.pass->release() and give_back the pass to the pool.
  // @hint 2: The copy is what the later send posts: a released pass holds no output. The ledger
  // @hint 2: must then show the kept inputs plus one chunk's activations, and the tests compare
  // @hint 2: that with activation_peak to the byte.
  if (a.chunk < this->map.chunk_count() - 1) {
    const std::span<const T> out = slot.pass->output();
    slot.out = Array<T>(this->comm.exec(), out, MemoryCategory::kCommBuffers);
  }
  slot.pass->release();
  give_back(std::move(slot.pass));
  // @end
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
    // @lab 05.5: Recompute: run the chunk's forward again from the kept input before the backward.
    // @hint 1: Take a pass from take_pass() into slot.pass and forward it on the chunk's range
    // @hint 1: and the micro-batch from slot.input, inside a this->run.phase("recompute", ...)
    // @hint 1: with the chunk, the micro-batch and fwd's flops and bytes. Then free slot.input
    // @hint 1: (an empty Array<T>()).
    // @hint 2: Free the input only after the forward that reads it: from then on the pass holds
    // @hint 2: what the backward needs.
    slot.pass = take_pass();
    auto phase = this->run.phase(
        "recompute", {.stage = a.chunk, .micro_batch = a.mb, .flops = fwd.flops, .bytes = fwd.bytes});
    slot.pass->forward(range, batch, slot.input.span());
    slot.input = Array<T>();
    // @end
  }
  collect(false, a.chunk, a.mb);  // its activation has arrived; free what its send kept
  // @lab 05.3: Backward the micro-batch from its output's gradient, weighted by its share of the batch.
  // @hint 1: slot.pass->backward(dy, weight) adds weight × the gradient: give it slot.dy's span
  // @hint 1: and the micro-batch's batch.weight as T, so that after the last micro-batch the
  // @hint 1: gradients are the whole batch's. On the last chunk slot.dy is empty and backward
  // @hint 1: starts from the loss. Free slot.dy afterwards.
  // @hint 2: Run it inside this->run.phase("backward", {.stage = chunk, .micro_batch = mb, .flops
  // @hint 2: = 2 * fwd.flops, .bytes = 2 * fwd.bytes}): a backward costs twice a forward, and the
  // @hint 2: timeline and the modeled fabric read the phase.
  auto phase = this->run.phase("backward", {.stage = a.chunk, .micro_batch = a.mb,
                                            .flops = 2 * fwd.flops, .bytes = 2 * fwd.bytes});
  slot.pass->backward(slot.dy.span(), static_cast<T>(batch.weight));
  slot.dy = Array<T>();
  // @end
  slot.backwarded = true;
  if (a.chunk == 0) give_back(std::move(slot.pass));  // no gradient to send
}

// executor.cpp's step() calls these for the two element types.
template void Executor<float>::State::forward(const Action&, Slot&);
template void Executor<double>::State::forward(const Action&, Slot&);
template void Executor<float>::State::backward(const Action&, Slot&);
template void Executor<double>::State::backward(const Action&, Slot&);

}  // namespace dtw::ch05
