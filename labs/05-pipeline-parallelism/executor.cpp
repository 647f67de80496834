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
// Every micro-batch's backward adds weight × its gradient (weight = its rows
// / the batch), so after the last one the gradients are those of the whole
// batch's mean loss, as the reference computes them. Then the step, the same
// on every schedule (finish_step, step_sync.cpp).
#include <algorithm>
#include <map>
#include <utility>

#include "dtw/errors.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

template <class T>
struct Executor<T>::State : StepContext<T> {
  using StepContext<T>::StepContext;
  struct Slot {
    std::unique_ptr<train::StagePass<T>> pass;
    Array<T> input;  // received input activation (kept until backward when checkpointing)
    Array<T> dy;     // received gradient of the output
    Array<T> out;    // checkpointing: a copy of the output for the send
    bool forwarded = false, backwarded = false;
  };
  struct Posted {  // a send in flight and what must outlive it
    Request request;
    int chunk = 0, mb = 0;
    Dir dir = Dir::kActivation;
    Array<T> copy;
    std::unique_ptr<train::StagePass<T>> pass;
  };
  std::map<std::pair<int, int>, Slot> slots;
  std::vector<std::unique_ptr<train::StagePass<T>>> pool;  // passes to reuse
  std::vector<Posted> posted;

  std::unique_ptr<train::StagePass<T>> take_pass() {
    if (pool.empty()) return std::make_unique<train::StagePass<T>>(this->replica);
    auto pass = std::move(pool.back());
    pool.pop_back();
    return pass;
  }
  void give_back(std::unique_ptr<train::StagePass<T>> pass) {
    if (pass) pool.push_back(std::move(pass));
  }
  // Waits for every posted send (all), or for the activation send of
  // (chunk, mb) only, and lets go of what they kept alive.
  void collect(bool all, int chunk = -1, int mb = -1) {
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
  }
  void post(std::span<const T> data, int peer, int tag, Posted entry) {
    if (this->options.blocking_sends) {
      this->comm.send(data, peer, tag);  // returns once the peer has it
      give_back(std::move(entry.pass));
      return;
    }
    entry.request = this->comm.isend(data, peer, tag);
    posted.push_back(std::move(entry));
  }

  void recv(const Action& a, Slot& slot) {
    const train::Batch& batch = this->batch(a.mb);
    const model::UnitRange range = this->map.chunks[a.chunk];
    // Under checkpointing the input's buffer *is* the micro-batch's saved
    // input, so it counts as activations; otherwise it lives only until the
    // forward has copied it.
    const auto input_category = this->options.checkpoint ? MemoryCategory::kActivations
                                                         : MemoryCategory::kCommBuffers;
    DTW_TODO("05.3: Receive what this action waits for: the chunk's input activation, or its output's gradient.");
  }

  // The forward, written out as the model for the rest: a pass from the
  // pool runs the chunk's units on the micro-batch, from the received input
  // (chunk 0 reads the batch's tokens), inside a timeline phase that names
  // the chunk, the micro-batch and the FLOPs; the last chunk's pass returns
  // the micro-batch's mean loss, which enters the step's loss with the
  // micro-batch's weight (its share of the batch's rows).
  void forward(const Action& a, Slot& slot) {
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

  void backward(const Action& a, Slot& slot) {
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

  void send(const Action& a, Slot& slot) {
    Posted entry{.chunk = a.chunk, .mb = a.mb, .dir = a.dir};
    DTW_TODO("05.3: Post this action's message: the output to the next chunk's rank, or the input's gradient to the previous chunk's.");
  }
};

template <class T>
Executor<T>::Executor(train::RankRun<T>& run, train::Replica<T>& replica, const StageMap& map,
                      ExecutorOptions options)
    : state_(std::make_unique<State>(run, replica, map, options)) {}
template <class T>
Executor<T>::~Executor() = default;

template <class T>
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
