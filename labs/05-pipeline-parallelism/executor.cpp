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
  DTW_TODO("05.3: Receive what this action waits for: the chunk's input activation, or its output's gradient.");
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
  DTW_TODO("05.3: Post this action's message: the output to the next chunk's rank, or the input's gradient to the previous chunk's.");
}

template <TrainElement T>
void Executor<T>::State::post(std::span<const T> data, int peer, int tag, Posted entry) {
  entry.data = data;  // what the buffer-lifetime check watches (pipeline_internal.h)
  DTW_TODO("05.3: Send without waiting for the receiver (unless the options ask for blocking sends), and keep what the send reads alive until it completes.");
}

template <TrainElement T>
void Executor<T>::State::collect(bool all, int chunk, int mb) {
  DTW_TODO("05.3: Wait for the posted sends asked for (every one, or the activation send of (chunk, mb)) and let go of what they kept alive.");
}

template <TrainElement T>
void Executor<T>::State::run_list(std::span<const Action> actions) {
  DTW_TODO("05.3: Run the list in order, each action on the slot of its (chunk, micro-batch), and return with no send in flight.");
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
