// The executor: runs one rank's list of a schedule, whatever made it.
//
// Per (chunk, micro-batch) in flight the rank keeps a slot: the StagePass
// holding the forward's activations, the received input and the received
// output gradient. The four actions:
//
//   recv act  c mb : input  ← rank of c−1   (blocking: the data is needed next)
//   F         c mb : StagePass::forward(units of c, micro-batch mb, input)
//   send act  c mb : output → rank of c+1   (posted: the rank moves on)
//   recv grad c mb : dy     ← rank of c+1
//   B         c mb : StagePass::backward(dy, weight of mb): += its gradient
//   send grad c mb : input_grad → rank of c−1
//
// Sends are posted (isend) and the rank carries on computing: a send that
// waited for its receiver would tie the two ranks' lists together, and two
// neighbours that both send first would wait for each other for ever (the
// pitfall of pytorch#172668, ExecutorOptions::blocking_sends). A posted send
// keeps its buffer alive until it completes: the pass for a gradient, a copy
// of the output under checkpointing. The rank waits for a send only where it
// must: an activation's before the same micro-batch's backward frees it
// (by then it has arrived: the gradient the backward needs was computed
// from it), everything else at the end of the step. It never polls: a rank
// that polled at every action would, in a replay on another fabric, wait
// wherever its poll happened to succeed on this machine.
//
// This file runs the list and moves the messages (recv, send); the compute
// actions, F and B with checkpointing's recompute, are in executor_passes.cpp,
// and the slot and send bookkeeping both use in pipeline_internal.h. After the
// last action comes the step, the same on every schedule (finish_step,
// step_sync.cpp).
//
// Every message goes through `comm`, the pipeline's communicator: the world
// in this chapter, one pipeline's group of it when chapter 08 runs several
// data-parallel replicas of the pipeline side by side.
#include <memory>
#include <utility>

#include "dtw/errors.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

template <TrainElement T>
void Executor<T>::State::recv(const Action& a, Slot& slot) {
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  // Under checkpointing the input's buffer *is* the micro-batch's saved
  // input, so it counts as activations; otherwise it lives only until the
  // forward has copied it.
  const auto input_category = this->options.checkpoint ? MemoryCategory::kActivations
                                                       : MemoryCategory::kCommBuffers;
  // @lab 05.3: Receive what this action waits for: the chunk's input activation, or its output's gradient.
  // @hint 1: An activation comes from the rank of chunk − 1 into slot.input, a gradient from the
  // @hint 1: rank of chunk + 1 into slot.dy. Make each buffer first, an
  // @hint 1: Array<T>(this->comm.exec(), size, category) of the boundary's size:
  // @hint 1: this->net().boundary_elements(range.begin, batch) for the input,
  // @hint 1: boundary_elements(range.end, batch) for the gradient.
  // @hint 2: The tag names the chunk that sent the message: pipe_tag(Dir::kActivation, chunk - 1,
  // @hint 2: mb), pipe_tag(Dir::kGradient, chunk + 1, mb); map.rank_of(c) is chunk c's rank. The
  // @hint 2: input counts as input_category (activations under checkpointing, when it is kept),
  // @hint 2: the gradient as MemoryCategory::kCommBuffers.
  if (a.dir == Dir::kActivation) {
    slot.input = Array<T>(this->comm.exec(), this->net().boundary_elements(range.begin, batch),
                          input_category);
    this->comm.recv(slot.input, this->map.rank_of(a.chunk - 1),
                    pipe_tag(Dir::kActivation, a.chunk - 1, a.mb));
  } else {
    slot.dy = Array<T>(this->comm.exec(), this->net().boundary_elements(range.end, batch),
                       MemoryCategory::kCommBuffers);
    this->comm.recv(slot.dy, this->map.rank_of(a.chunk + 1),
                    pipe_tag(Dir::kGradient, a.chunk + 1, a.mb));
  }
  // @end
}

template <TrainElement T>
void Executor<T>::State::send(const Action& a, Slot& slot) {
  Posted entry{.chunk = a.chunk, .mb = a.mb, .dir = a.dir};
  // @lab 05.3: Post this action's message: the output to the next chunk's rank, or the input's gradient to the previous chunk's.
  // @hint 1: An activation: slot.pass->output() to the rank of chunk + 1 (under checkpointing the
  // @hint 1: copy slot.out, moved into entry.copy). A gradient: slot.pass->input_grad() to the
  // @hint 1: rank of chunk − 1, moving the pass into entry.pass. Both go through post(data, peer,
  // @hint 1: pipe_tag(dir, chunk, mb), std::move(entry)).
  // @hint 2: post() sends with isend, and whatever the send reads must outlive it: that is why
  // @hint 2: the entry carries the copy or the pass. A send before its forward (slot.forwarded)
  // @hint 2: or backward (slot.backwarded) is an InvalidArgument naming the rank and the action.
  if (a.dir == Dir::kActivation) {
    DTW_CHECK_ARG(slot.forwarded, "rank " << this->rank << ": " << to_string(a) << " before F" << a.mb);
    std::span<const T> data = slot.pass ? slot.pass->output() : std::span<const T>();
    if (this->options.checkpoint) {
      entry.copy = std::move(slot.out);
      data = entry.copy.span();
    }
    post(data, this->map.rank_of(a.chunk + 1), pipe_tag(Dir::kActivation, a.chunk, a.mb),
         std::move(entry));
  } else {
    DTW_CHECK_ARG(slot.backwarded, "rank " << this->rank << ": " << to_string(a) << " before B" << a.mb);
    const std::span<const T> data = slot.pass->input_grad();
    entry.pass = std::move(slot.pass);  // the gradient lives in the pass
    post(data, this->map.rank_of(a.chunk - 1), pipe_tag(Dir::kGradient, a.chunk, a.mb),
         std::move(entry));
  }
  // @end
}

template <TrainElement T>
Executor<T>::Executor(train::RankRun<T>& run, train::Replica<T>& replica, const StageMap& map,
                      ExecutorOptions options)
    : Executor(run, run.comm(), replica, map, options) {}
template <TrainElement T>
Executor<T>::Executor(train::RankRun<T>& run, Comm& comm, train::Replica<T>& replica,
                      const StageMap& map, ExecutorOptions options, ExecutorHooks<T> hooks)
    : state_(std::make_unique<State>(run, comm, replica, map, options, std::move(hooks))) {}
template <TrainElement T>
Executor<T>::~Executor() = default;

template <TrainElement T>
double Executor<T>::step(std::span<const Action> actions, std::int64_t step, int m) {
  State& s = *state_;
  s.begin_step(step, m);
  try {
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      s.check_action(a, i);
      typename State::Slot& slot = s.slots[{a.chunk, a.mb}];
      switch (a.op) {
        case Op::kRecv: s.recv(a, slot); break;
        case Op::kForward: s.forward(a, slot); break;
        case Op::kSend: s.send(a, slot); break;
        case Op::kBackward: s.backward(a, slot); break;
      }
    }
    s.collect(true);
  } catch (const TimeoutError& e) {  // the same report, with its tags spelled out
    throw TimeoutError(explain_pipe_tags(e.message()));
  } catch (const DeadlockError& e) {
    throw DeadlockError(explain_pipe_tags(e.message()));
  }
  std::int64_t done = 0;
  for (const auto& [key, slot] : s.slots) done += slot.forwarded && slot.backwarded ? 1 : 0;
  s.check_complete(done);
  s.slots.clear();
  return s.finish_step();
}

template class Executor<float>;
template class Executor<double>;

}  // namespace dtw::ch05
