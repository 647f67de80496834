// What the executor (executor.cpp, executor_passes.cpp) shares with the end
// of its step (step_sync.cpp): the rank's run, the pipeline's communicator
// (the world, or a group of it in a composed run), its replica and map, the
// micro-batches of the step and where they come from, the end of the step,
// and the checks that turn a wrong schedule into a clear error; and the
// executor's own state, which its two files share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {

/// Tags of the tied embedding's exchange (pipe_tag's are 100000000 and up).
inline constexpr int kTiedGradTag = 1;   ///< the head's share of wte's gradient
inline constexpr int kTiedParamTag = 2;  ///< the stepped wte, back to the head

template <class T>
struct StepContext {
  StepContext(train::RankRun<T>& run, Comm& comm, train::Replica<T>& replica,
              const StageMap& map, ExecutorOptions options, ExecutorHooks<T> hooks);

  train::RankRun<T>& run;
  Comm& comm;  // the pipeline's: ranks are stages
  train::Replica<T>& replica;
  StageMap map;
  ExecutorOptions options;
  ExecutorHooks<T> hooks;
  int rank = 0;
  int embed_rank = 0, head_rank = 0;  // ranks of the first and the last chunk
  std::int64_t wte_end = 0;           // > 0: wte [0, wte_end) is on both of them
  std::int64_t step = 0;              // the data step being run
  int m = 1;                          // its micro-batches
  double loss = 0;                    // Σ weight × loss over this rank's last-chunk micro-batches
  std::vector<std::optional<train::Batch>> batches;

  train::Network<T>& net() { return replica.network(); }
  /// Starts data step `step` with `m` micro-batches.
  void begin_step(std::int64_t step, int m);
  /// Micro-batch `mb` of the step (made once, from hooks.micro_batches).
  const train::Batch& batch(int mb);
  /// InvalidArgument naming the rank and the action unless action `index`
  /// is for a chunk of this rank, a micro-batch of the step, and a message
  /// that has a peer.
  void check_action(const Action& a, std::size_t index) const;
  /// InvalidArgument unless `done` (chunk, micro-batch) pairs, every one of
  /// this rank's, were forwarded and backwarded.
  void check_complete(std::int64_t done) const;
  /// The end of the step after the last backward (the tied wte, then
  /// hooks.end_of_step); returns the global mean loss.
  double finish_step();
};

// The executor's state during a step: a slot per (chunk, micro-batch) in
// flight, the sends in flight with what they keep alive, and a pool of passes
// to reuse. The actions: recv and send in executor.cpp, forward and backward
// in executor_passes.cpp.
template <TrainElement T>
struct Executor<T>::State : StepContext<T> {
  using StepContext<T>::StepContext;
  /// What the rank holds for one (chunk, micro-batch) between its first
  /// action and its last. Each buffer lives only as long as an action still
  /// needs it (the memory tests count every byte).
  struct Slot {
    std::unique_ptr<train::StagePass<T>> pass;  // the forward's activations, then the input's gradient
    Array<T> input;  // the received input activation
    Array<T> dy;     // the received gradient of the output
    Array<T> out;    // checkpointing: a copy of the output for its send
    bool forwarded = false, backwarded = false;
  };
  /// A send in flight and what must outlive it.
  struct Posted {
    Request request;
    int chunk = 0, mb = 0;
    Dir dir = Dir::kActivation;
    std::span<const T> data;  // what the send reads (set by post before the send starts)
    Array<T> copy;
    std::unique_ptr<train::StagePass<T>> pass;
  };
  std::map<std::pair<int, int>, Slot> slots;
  std::vector<std::unique_ptr<train::StagePass<T>>> pool;  // passes to reuse
  std::vector<Posted> posted;
  Action acting;  // the action being run (set before each one's own code)

  /// The buffer-lifetime rule, checked: InvalidArgument naming the rank, the
  /// action being run and the send in flight when a pass `what` (going back
  /// to the pool, or taken from it) holds memory that a posted send not yet
  /// waited for still reads.
  void check_not_read_by_send(const train::StagePass<T>& pass, const char* what) const {
    for (const Posted& p : posted) {
      if (!p.request.pending() || p.data.empty()) continue;
      for (const std::span<const T> held : {pass.output(), pass.input_grad()}) {
        const bool overlaps = !held.empty() && p.data.data() < held.data() + held.size() &&
                              held.data() < p.data.data() + p.data.size();
        DTW_CHECK_ARG(!overlaps,
                      "rank " << this->rank << ", in " << to_string(acting) << ": a pass " << what
                              << " the pool while "
                              << to_string(Action{Op::kSend, p.chunk, p.mb, p.dir})
                              << " still reads its memory (not waited for yet). The rule: a buffer "
                                 "a send reads must outlive the send: keep it in the send's entry "
                                 "and let it go only after the wait");
      }
    }
  }
  /// A pass from the pool (a new one when it is empty).
  std::unique_ptr<train::StagePass<T>> take_pass() {
    if (pool.empty()) return std::make_unique<train::StagePass<T>>(this->replica);
    auto pass = std::move(pool.back());
    pool.pop_back();
    check_not_read_by_send(*pass, "taken from");
    return pass;
  }
  /// Returns a pass to the pool (nothing when it is empty). InvalidArgument
  /// while a posted send still reads its memory.
  void give_back(std::unique_ptr<train::StagePass<T>> pass) {
    if (!pass) return;
    check_not_read_by_send(*pass, "went back to");
    pool.push_back(std::move(pass));
  }
  /// Runs `work` inside the timeline's compute phase `name` ("forward",
  /// "backward", "recompute") of action `a`, charged `times` × the forward's
  /// work of its chunk on its micro-batch (a backward is 2). A backward while
  /// the activation send of its (chunk, micro-batch) is still in flight is an
  /// InvalidArgument naming the rank, the action and the rule.
  template <class Work>
  void timed(const char* name, const Action& a, int times, Work&& work) {
    if (std::string_view(name) == "backward")
      for (const Posted& p : posted)
        DTW_CHECK_ARG(!(p.dir == Dir::kActivation && p.chunk == a.chunk && p.mb == a.mb &&
                        p.request.pending()),
                      "rank " << this->rank << ", in " << to_string(a) << ": the backward starts while "
                              << to_string(Action{Op::kSend, p.chunk, p.mb, p.dir})
                              << " is still in flight. The rule: wait for a micro-batch's "
                                 "activation send before its backward, which frees the output "
                                 "the send reads");
    const train::Cost c = this->replica.pass_cost(this->map.chunks[a.chunk], this->batch(a.mb), false);
    auto phase = this->run.phase(name, {.stage = a.chunk, .micro_batch = a.mb,
                                        .flops = times * c.flops, .bytes = times * c.bytes});
    work();
  }

  /// Step 05.3: runs the rank's list, each action on the slot of its
  /// (chunk, micro-batch); when it returns, no send is in flight.
  void run_list(std::span<const Action> actions);
  /// Step 05.3: waits for every posted send (all), or for the activation
  /// send of (chunk, mb) only, and lets go of what they kept alive.
  void collect(bool all, int chunk = -1, int mb = -1);
  /// Step 05.3: sends `data` to `peer` with `tag` without waiting for the
  /// receiver (with options.blocking_sends: a send that returns once the peer
  /// has it, the pitfall of pytorch#172668), keeping what `entry` holds alive
  /// as long as the send may read it.
  void post(std::span<const T> data, int peer, int tag, Posted entry);
  void recv(const Action& a, Slot& slot);
  void forward(const Action& a, Slot& slot);
  void backward(const Action& a, Slot& slot);
  void send(const Action& a, Slot& slot);
};

}  // namespace dtw::ch05
