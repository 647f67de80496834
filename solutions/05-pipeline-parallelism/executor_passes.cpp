// The executor's compute actions: F and B of (chunk, micro-batch), and with
// activation checkpointing the recompute before B (executor.cpp runs the
// list and moves the messages).
//
// After the last micro-batch's backward the gradients must be those of the
// whole batch's mean loss, as the reference computes them, and the step's
// loss the batch's mean loss. With checkpointing (step 05.5) a micro-batch
// between its forward and its backward holds only its input (and a copy of
// its output until the send has it), and its backward gets the activations
// back by computing the forward again.
#include <utility>

#include "dtw/errors.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

template <TrainElement T>
void Executor<T>::State::forward(const Action& a, Slot& slot) {
  acting = a;
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  const bool last = a.chunk == this->map.chunk_count() - 1;
  DTW_CHECK_ARG(a.chunk == 0 || slot.input.size() > 0,
                "rank " << this->rank << ": " << to_string(a) << " before its input arrived");
  // @lab 05.3: Forward the micro-batch through the chunk's units, add the last chunk's loss to the step's, and free what the forward no longer needs.
  // @hint 1: The forward runs the chunk's units on the micro-batch, from the received input (chunk
  // @hint 1: 0 reads the batch's tokens), and keeps the activations its backward will need. On
  // @hint 1: the last chunk it returns the micro-batch's mean loss, which counts in the step's loss
  // @hint 1: by the micro-batch's share of the batch's rows. Without checkpointing, the received
  // @hint 1: input is not needed after it.
  // @hint 2: slot.pass = a pass from the pool; run its forward inside the timeline's "forward"
  // @hint 2: phase; if last: loss += weight × the returned loss; unless checkpointing, free
  // @hint 2: slot.input (the pass keeps its own copy). Trap: under checkpointing the input stays:
  // @hint 2: step 05.5 recomputes from it.
  // @hint 3: take_pass(); timed("forward", a, 1, [&] { ... }); slot.pass->forward(range, batch,
  // @hint 3: slot.input.span()); batch.weight; this->loss; slot.input = Array<T>().
  slot.pass = take_pass();
  timed("forward", a, 1, [&] {
    const T mb_loss = slot.pass->forward(range, batch, slot.input.span());
    if (last) this->loss += batch.weight * static_cast<double>(mb_loss);
  });
  if (!this->options.checkpoint) slot.input = Array<T>();  // the pass keeps its own copy
  // @end
  slot.forwarded = true;
  if (!this->options.checkpoint) return;
  // @lab 05.5: Checkpointing: keep only the input, copy the output for its send, and release the pass's activations.
  // @hint 1: Between a micro-batch's forward and its backward, checkpointing keeps only what is
  // @hint 1: needed to compute the forward again, its input, plus what the send still has to
  // @hint 1: carry: the chunk's output. Everything else the forward made is released now.
  // @hint 2: slot.input stays (chunk 0 has none: its input is the batch). Unless this is the last
  // @hint 2: chunk, which sends nothing, copy the pass's output into slot.out; then release the
  // @hint 2: pass's activations and return it to the pool. Trap: copy before releasing: a released
  // @hint 2: pass holds no output. The ledger must show the kept inputs plus one chunk's
  // @hint 2: activations, and the tests compare that with activation_peak to the byte.
  // @hint 3: Array<T>(this->comm.exec(), slot.pass->output(), MemoryCategory::kCommBuffers);
  // @hint 3: slot.pass->release(); give_back(std::move(slot.pass)).
  if (!last) {
    const std::span<const T> out = slot.pass->output();
    slot.out = Array<T>(this->comm.exec(), out, MemoryCategory::kCommBuffers);
  }
  slot.pass->release();
  give_back(std::move(slot.pass));
  // @end
}

template <TrainElement T>
void Executor<T>::State::backward(const Action& a, Slot& slot) {
  acting = a;
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  const bool last = a.chunk == this->map.chunk_count() - 1;
  DTW_CHECK_ARG(slot.forwarded && (last || slot.dy.size() > 0),
                "rank " << this->rank << ": " << to_string(a) << " before its "
                        << (slot.forwarded ? "output gradient arrived" : "forward"));
  if (this->options.checkpoint) {
    // @lab 05.5: Recompute: run the chunk's forward again from the kept input before the backward.
    // @hint 1: The backward needs the activations that the checkpointed forward released: get
    // @hint 1: them back by running the same forward again, from the input kept for it, as a
    // @hint 1: recompute on the timeline. Then the input has served its purpose.
    // @hint 2: slot.pass = a pass from the pool; its forward on the chunk's units and the
    // @hint 2: micro-batch from slot.input, inside the "recompute" phase (charged one forward);
    // @hint 2: then free slot.input. Trap: free the input only after the forward that reads it.
    // @hint 3: take_pass(); timed("recompute", a, 1, [&] { slot.pass->forward(range, batch,
    // @hint 3: slot.input.span()); }); slot.input = Array<T>().
    slot.pass = take_pass();
    timed("recompute", a, 1, [&] { slot.pass->forward(range, batch, slot.input.span()); });
    slot.input = Array<T>();
    // @end
  }
  // @lab 05.3: Backward the micro-batch from its output's gradient, weighted by its share of the batch, and free what it no longer needs.
  // @hint 1: The backward adds this micro-batch's share of the gradient (its weight, its rows over
  // @hint 1: the batch's) to the chunk's gradients, so that after the last micro-batch they are the
  // @hint 1: whole batch's. Before it, the send of this micro-batch's output must have completed
  // @hint 1: (it has arrived: the gradient was computed from it). After it the received gradient
  // @hint 1: is not needed, and on chunk 0, which sends no gradient, neither is the pass.
  // @hint 2: wait for this (chunk, mb)'s activation send; backward(dy, weight) inside the
  // @hint 2: "backward" phase, charged two forwards; free slot.dy; if chunk 0, return the pass to
  // @hint 2: the pool. On the last chunk dy is empty: the backward starts from the loss. Trap:
  // @hint 2: elsewhere the pass lives on: the gradient send reads its input gradient.
  // @hint 3: collect(false, a.chunk, a.mb); timed("backward", a, 2, [&] {
  // @hint 3: slot.pass->backward(slot.dy.span(), static_cast<T>(batch.weight)); });
  // @hint 3: slot.dy = Array<T>(); if (a.chunk == 0) give_back(std::move(slot.pass)).
  collect(false, a.chunk, a.mb);  // its activation has arrived; free what its send kept
  timed("backward", a, 2, [&] { slot.pass->backward(slot.dy.span(), static_cast<T>(batch.weight)); });
  slot.dy = Array<T>();
  if (a.chunk == 0) give_back(std::move(slot.pass));  // no gradient to send
  // @end
  slot.backwarded = true;
}

// executor.cpp's step() calls these for the two element types.
template void Executor<float>::State::forward(const Action&, Slot&);
template void Executor<double>::State::forward(const Action&, Slot&);
template void Executor<float>::State::backward(const Action&, Slot&);
template void Executor<double>::State::backward(const Action&, Slot&);

}  // namespace dtw::ch05
