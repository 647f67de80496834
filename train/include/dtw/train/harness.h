#pragma once
/// @file
/// The harness that runs, checks and measures any strategy: run_ranks
/// launches a rank function on every rank, compares what each rank reported
/// with the reference inside that rank (so it works on every backend, MPI
/// included) and gathers every rank's outcome; run_strategy does the same
/// for a registered Strategy after check_strategy. What `dtw train`,
/// `dtw bench train` and the chapters' tests call.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/launch.h"
#include "dtw/model/trainer.h"
#include "dtw/train/knobs.h"
#include "dtw/train/rank_run.h"
#include "dtw/train/run_spec.h"
#include "dtw/train/strategy_registry.h"
#include "dtw/types.h"

namespace dtw::train {

/// How the harness runs a strategy.
struct HarnessOptions {
  int ranks = 1;                   ///< world size
  std::string backend = "threads";  ///< launch backend
  /// Where the ranks' memory and work live: LaunchOptions::device ("" or
  /// "host": the backend's own place; "cuda": threads ranks sharing the
  /// machine's GPUs, rank r on device r % devices, each Replica on its
  /// rank's GPU). The reference stays on the host: a device run is compared
  /// with the same host reference.
  std::string device;
  bool trace = false;              ///< record the trace (timeline, fabric)
  std::int64_t memory_cap = 0;     ///< per-rank ledger cap in bytes (0: none)
  std::chrono::milliseconds timeout{120'000};  ///< per blocking call
  Knobs knobs;                     ///< the strategy's parameters
  bool compare = true;             ///< compare with the reference on every rank
  /// On a divergence in a double run of more than one step, rerun the
  /// strategy on fewer steps (a bisection: about log₂ steps more runs) to name
  /// the first step after which any rank differs (RunOutcome::divergence).
  bool locate_divergence = true;
  /// World rank 0's record_loss calls (progress bars); called on its thread.
  std::function<void(const model::StepInfo&)> on_step;
  /// Where world rank 0's layer times go (RankRun::layer_times); may be null.
  model::LayerTimes* layer_times = nullptr;
};

/// One rank's outcome, as every rank receives it.
struct RankOutcome {
  int rank = 0;
  bool matches = true;          ///< within tolerance of the reference
  std::string mismatch;         ///< the first divergence on this rank
  double max_abs_diff = 0;      ///< max |θ − θ_ref| over what the rank reported
  std::int64_t compared = 0;    ///< parameter elements it reported
  /// The element with the largest relative error among those it reported
  /// (empty when none differs), and that error.
  std::string largest_error;
  double largest_rel_error = 0;  ///< of largest_error
  double seconds = 0;           ///< wall time of its rank function
  std::vector<double> losses;   ///< the losses it recorded
  std::int64_t resumed_steps = 0;  ///< of them, taken from a checkpoint (RankRun::record_resumed)
  /// Its layer times over the run (RankRun::layer_times), most time first:
  /// every stage's, not only rank 0's, for the per-layer table.
  std::vector<model::LayerTimes::Entry> layer_times;
};

/// Where a run first went wrong (RunOutcome::divergence), found by rerunning
/// it on fewer steps.
struct Divergence {
  std::int64_t step = -1;   ///< the first number of steps after which a rank differs (1-based)
  std::vector<int> ranks;   ///< the ranks that differ then
  std::string largest;      ///< the element with the largest relative error then, and on which rank
};

/// What a harness run did.
struct RunOutcome {
  Report report;                     ///< traffic, trace, memory, errors (launch's)
  std::vector<RankOutcome> ranks;    ///< every rank's outcome, by world rank
  std::vector<double> losses;        ///< the losses of the lowest rank that recorded all steps
  /// False when nothing was compared with the reference (HarnessOptions::compare
  /// off, or a strategy that does not reproduce it: Strategy::reproduces).
  bool checked = true;
  bool matches = true;               ///< every rank matches the reference
  std::string mismatch;              ///< the lowest rank's first divergence
  double max_abs_param_diff = 0;     ///< over every rank
  std::int64_t compared = 0;         ///< parameter elements compared, all ranks
  /// Elements of the model (Ψ), and how many of them at least one rank
  /// reported: a run matches only if every element was (a tensor held by
  /// several ranks, replicated, may be reported by each of them or by one).
  std::int64_t model_elements = 0;
  std::int64_t covered = 0;          ///< elements reported by at least one rank
  /// The first step after which a rank differed, when the run diverged and
  /// HarnessOptions::locate_divergence found it (step −1 otherwise).
  Divergence divergence;
  double seconds = 0;                ///< slowest rank's wall time of the training
  /// Steps a checkpoint had taken (resumed, not computed by this run; the
  /// most over the ranks): spec.steps − resumed_steps steps ran in `seconds`.
  std::int64_t resumed_steps = 0;
};

/// Runs `fn` on opts.ranks ranks for `spec` (in T; spec.dtype is set to
/// match), then, on every rank, compares what it reported with the reference
/// and shares every rank's outcome with every rank (so an MPI process can
/// assert on it). A run matches only if every parameter element of the model
/// was reported by some rank (the mismatch names each rank's count and the
/// first element nobody reported) and every reported element and loss is
/// within tolerance. A double run that diverged is rerun on fewer steps to
/// find where it began (RunOutcome::divergence, first in the mismatch):
/// the first step, the ranks that differ then and the element with the
/// largest error. Errors from a rank propagate as from dtw::launch; `spec`
/// is validated first, and an empty `fn` is an InvalidArgument before any
/// rank runs.
template <TrainElement T>
RunOutcome run_ranks(const RunSpec& spec, const HarnessOptions& opts,
                     const std::function<void(RankRun<T>&)>& fn);
/// Runs a registered strategy in spec.dtype after check_strategy (which
/// raises InvalidArgument, before any rank runs, for a world outside
/// [min_ranks, max_ranks] or knobs that Strategy::check refuses).
RunOutcome run_strategy(const Strategy& strategy, const RunSpec& spec, const HarnessOptions& opts);

}  // namespace dtw::train
