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
#include <utility>
#include <vector>

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

  void recv(const Action& a, Slot& slot);
  void forward(const Action& a, Slot& slot);
  void backward(const Action& a, Slot& slot);
  void send(const Action& a, Slot& slot);
};

}  // namespace dtw::ch05
