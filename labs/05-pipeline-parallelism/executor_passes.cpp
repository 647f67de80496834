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
  DTW_TODO("05.3: Forward the micro-batch through the chunk's units, add the last chunk's loss to the step's, and free what the forward no longer needs.");
  slot.forwarded = true;
  if (!this->options.checkpoint) return;
  DTW_TODO("05.5: Checkpointing: keep only the input, copy the output for its send, and release the pass's activations.");
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
    DTW_TODO("05.5: Recompute: run the chunk's forward again from the kept input before the backward.");
  }
  DTW_TODO("05.3: Backward the micro-batch from its output's gradient, weighted by its share of the batch, and free what it no longer needs.");
  slot.backwarded = true;
}

// executor.cpp's step() calls these for the two element types.
template void Executor<float>::State::forward(const Action&, Slot&);
template void Executor<double>::State::forward(const Action&, Slot&);
template void Executor<float>::State::backward(const Action&, Slot&);
template void Executor<double>::State::backward(const Action&, Slot&);

}  // namespace dtw::ch05
