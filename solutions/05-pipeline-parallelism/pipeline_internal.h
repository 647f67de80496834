// What the executor (executor.cpp) shares with the end of its step
// (step_sync.cpp): the rank's run, its replica and map, the micro-batches of
// the step, and the checks that turn a wrong schedule into a clear error.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline_parallelism.h"

namespace dtw::ch05 {

/// Tags of the tied embedding's exchange (pipe_tag's are 100000000 and up).
inline constexpr int kTiedGradTag = 1;   ///< the head's share of wte's gradient
inline constexpr int kTiedParamTag = 2;  ///< the stepped wte, back to the head

template <class T>
struct StepContext {
  StepContext(train::RankRun<T>& run, train::Replica<T>& replica, const StageMap& map,
              ExecutorOptions options);

  train::RankRun<T>& run;
  Comm& comm;
  train::Replica<T>& replica;
  StageMap map;
  ExecutorOptions options;
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
  /// Micro-batch `mb` of the step (made once).
  const train::Batch& batch(int mb);
  /// InvalidArgument naming the rank and the action unless action `index`
  /// is for a chunk of this rank, a micro-batch of the step, and a message
  /// that has a peer.
  void check_action(const Action& a, std::size_t index) const;
  /// InvalidArgument unless `done` (chunk, micro-batch) pairs, every one of
  /// this rank's, were forwarded and backwarded.
  void check_complete(std::int64_t done) const;
  /// The optimizer step after the last backward; returns the global mean loss.
  double finish_step();
};

}  // namespace dtw::ch05
