// The executor: runs one rank's list of a schedule, whatever made it.
//
// Per (chunk, micro-batch) in flight the rank keeps a slot (pipeline_internal.h).
// What each action must achieve:
//
//   recv act  c mb : c's input activation, from the rank of c−1
//   F         c mb : c's units on micro-batch mb (executor_passes.cpp)
//   send act  c mb : c's output, to the rank of c+1, without waiting for it
//   recv grad c mb : the gradient of c's output, from the rank of c+1
//   B         c mb : += weight of mb × the gradient of c's units (executor_passes.cpp)
//   send grad c mb : the gradient of c's input, to the rank of c−1, without waiting
//
// A send must not tie the two ranks' lists together (two neighbours that both
// send first must not wait for each other: pytorch#172668), every buffer a
// send reads must outlive it, a buffer no action needs any more must be
// freed, and the rank must never poll. The given part checks the lifetimes
// as the actions run (pipeline_internal.h: give_back, take_pass, timed): a
// break is an InvalidArgument naming the rank, the action and the rule. After the last action comes the end of
// the step, the same on every schedule (finish_step, step_sync.cpp).
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
  acting = a;
  const train::Batch& batch = this->batch(a.mb);
  const model::UnitRange range = this->map.chunks[a.chunk];
  // Under checkpointing the input's buffer *is* the micro-batch's saved
  // input, so it counts as activations; otherwise it lives only until the
  // forward has copied it.
  const auto input_category = this->options.checkpoint ? MemoryCategory::kActivations
                                                       : MemoryCategory::kCommBuffers;
  const auto dy_category = MemoryCategory::kCommBuffers;
  // @lab 05.3: Receive what this action waits for: the chunk's input activation, or its output's gradient.
  // @hint 1: A receive fills the slot with what the next compute action of this (chunk,
  // @hint 1: micro-batch) needs: its input activation, which the previous chunk's rank produced,
  // @hint 1: or the gradient of its output, which the next chunk's rank produced. It blocks: the
  // @hint 1: data is needed next.
  // @hint 2: activation: slot.input = a buffer of the size of the activation entering the chunk's
  // @hint 2: first unit, received from the rank of chunk − 1 with the tag of (activation, chunk −
  // @hint 2: 1, mb); gradient: slot.dy = a buffer of the size of the activation leaving the chunk's
  // @hint 2: last unit, from the rank of chunk + 1 with the tag of (gradient, chunk + 1, mb). The
  // @hint 2: tag names the chunk that *sent* the message. Trap: the input counts as
  // @hint 2: input_category, the gradient as dy_category.
  // @hint 3: Array<T>(this->comm.exec(), this->net().boundary_elements(range.begin, batch),
  // @hint 3: input_category) (range.end for dy); this->comm.recv(buffer, this->map.rank_of(c),
  // @hint 3: pipe_tag(Dir::kActivation, a.chunk - 1, a.mb)).
  if (a.dir == Dir::kActivation) {
    slot.input = Array<T>(this->comm.exec(), this->net().boundary_elements(range.begin, batch),
                          input_category);
    this->comm.recv(slot.input, this->map.rank_of(a.chunk - 1),
                    pipe_tag(Dir::kActivation, a.chunk - 1, a.mb));
  } else {
    slot.dy = Array<T>(this->comm.exec(), this->net().boundary_elements(range.end, batch), dy_category);
    this->comm.recv(slot.dy, this->map.rank_of(a.chunk + 1),
                    pipe_tag(Dir::kGradient, a.chunk + 1, a.mb));
  }
  // @end
}

template <TrainElement T>
void Executor<T>::State::send(const Action& a, Slot& slot) {
  acting = a;
  DTW_CHECK_ARG(a.dir == Dir::kGradient || slot.forwarded,
                "rank " << this->rank << ": " << to_string(a) << " before its forward "
                        << to_string(Action{Op::kForward, a.chunk, a.mb}));
  DTW_CHECK_ARG(a.dir == Dir::kActivation || slot.backwarded,
                "rank " << this->rank << ": " << to_string(a) << " before its backward "
                        << to_string(Action{Op::kBackward, a.chunk, a.mb}));
  Posted entry{.chunk = a.chunk, .mb = a.mb, .dir = a.dir};
  // @lab 05.3: Post this action's message: the output to the next chunk's rank, or the input's gradient to the previous chunk's.
  // @hint 1: An activation send carries the chunk's output to the rank of the next chunk; a
  // @hint 1: gradient send carries the gradient of the chunk's input to the rank of the previous
  // @hint 1: chunk. Neither waits for the receiver, so whatever holds the data must stay alive
  // @hint 1: until the send completes, in the entry that goes with it.
  // @hint 2: activation: the data is the pass's output, or under checkpointing the copy in
  // @hint 2: slot.out (the pass was released), which moves into the entry; gradient: the data is
  // @hint 2: the pass's input gradient, and the pass itself moves into the entry (the slot is done
  // @hint 2: with it). The tag names this chunk as the sender. Trap: the span must be taken before
  // @hint 2: the buffer moves, and a moved Array keeps its storage.
  // @hint 3: slot.pass->output(), slot.pass->input_grad(), entry.copy = std::move(slot.out),
  // @hint 3: entry.pass = std::move(slot.pass); post(data, this->map.rank_of(a.chunk + 1),
  // @hint 3: pipe_tag(Dir::kActivation, a.chunk, a.mb), std::move(entry)).
  if (a.dir == Dir::kActivation) {
    std::span<const T> data = slot.pass ? slot.pass->output() : std::span<const T>();
    if (this->options.checkpoint) {
      entry.copy = std::move(slot.out);
      data = entry.copy.span();
    }
    post(data, this->map.rank_of(a.chunk + 1), pipe_tag(Dir::kActivation, a.chunk, a.mb),
         std::move(entry));
  } else {
    const std::span<const T> data = slot.pass->input_grad();
    entry.pass = std::move(slot.pass);  // the gradient lives in the pass
    post(data, this->map.rank_of(a.chunk - 1), pipe_tag(Dir::kGradient, a.chunk, a.mb),
         std::move(entry));
  }
  // @end
}

template <TrainElement T>
void Executor<T>::State::post(std::span<const T> data, int peer, int tag, Posted entry) {
  entry.data = data;  // what the buffer-lifetime check watches (pipeline_internal.h)
  // @lab 05.3: Send without waiting for the receiver (unless the options ask for blocking sends), and keep what the send reads alive until it completes.
  // @hint 1: A posted send lets the rank carry on computing while the message travels; the entry
  // @hint 1: holds the buffer the send reads, so it must live as long as the send, in the list of
  // @hint 1: sends in flight. The blocking pitfall's send returns only once the peer has the data:
  // @hint 1: then nothing needs to outlive it.
  // @hint 2: blocking: send, hand the entry's pass back to the pool, done. Otherwise: start the
  // @hint 2: send, keep its request in the entry, and append the entry to `posted`, where
  // @hint 2: collect() will wait for it. Trap: never wait here, or two neighbours that both send
  // @hint 2: first wait for each other for ever.
  // @hint 3: this->options.blocking_sends; this->comm.send(data, peer, tag);
  // @hint 3: give_back(std::move(entry.pass)); entry.request = this->comm.isend(data, peer, tag);
  // @hint 3: posted.push_back(std::move(entry)).
  if (this->options.blocking_sends) {
    this->comm.send(data, peer, tag);  // returns once the peer has it
    give_back(std::move(entry.pass));
    return;
  }
  entry.request = this->comm.isend(data, peer, tag);
  posted.push_back(std::move(entry));
  // @end
}

template <TrainElement T>
void Executor<T>::State::collect(bool all, int chunk, int mb) {
  // @lab 05.3: Wait for the posted sends asked for (every one, or the activation send of (chunk, mb)) and let go of what they kept alive.
  // @hint 1: A send in flight is finished only once waited for; then what it kept alive (a copy
  // @hint 1: of an output, a pass holding an input gradient) can go. The rank waits only where it
  // @hint 1: must: for one micro-batch's activation just before its backward reuses the memory,
  // @hint 1: for everything at the end of the step. It never polls.
  // @hint 2: for each entry of `posted`: skip it unless `all`, or it is the activation send of
  // @hint 2: (chunk, mb); else wait for its request, return its pass to the pool and remove the
  // @hint 2: entry. Trap: removing from a vector you walk: do not advance the index past the next
  // @hint 2: entry.
  // @hint 3: this->comm.wait(entry.request); give_back(std::move(entry.pass));
  // @hint 3: posted.erase(posted.begin() + i).
  for (std::size_t i = 0; i < posted.size();) {
    Posted& p = posted[i];
    if (!all && !(p.dir == Dir::kActivation && p.chunk == chunk && p.mb == mb)) {
      ++i;
      continue;
    }
    this->comm.wait(p.request);
    give_back(std::move(p.pass));
    posted.erase(posted.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // @end
}

template <TrainElement T>
void Executor<T>::State::run_list(std::span<const Action> actions) {
  // @lab 05.3: Run the list in order, each action on the slot of its (chunk, micro-batch), and return with no send in flight.
  // @hint 1: The list is the schedule: run its actions one after the other, never reordering,
  // @hint 1: each on the state this rank keeps for that (chunk, micro-batch). After the last one,
  // @hint 1: every send this rank posted must have completed before the step goes on.
  // @hint 2: for each action: slot = the slot of (chunk, mb), made on first use; dispatch on the
  // @hint 2: op to receive, forward, send or backward; at the end, wait for all posted sends.
  // @hint 3: slots[{a.chunk, a.mb}]; recv(a, slot), forward(a, slot), send(a, slot),
  // @hint 3: backward(a, slot); collect(true).
  for (const Action& a : actions) {
    Slot& slot = slots[{a.chunk, a.mb}];
    switch (a.op) {
      case Op::kRecv: recv(a, slot); break;
      case Op::kForward: forward(a, slot); break;
      case Op::kSend: send(a, slot); break;
      case Op::kBackward: backward(a, slot); break;
    }
  }
  collect(true);
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
  for (std::size_t i = 0; i < actions.size(); ++i) s.check_action(actions[i], i);
  try {
    s.run_list(actions);
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
