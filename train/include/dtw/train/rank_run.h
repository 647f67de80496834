#pragma once
/// @file
/// What a strategy author writes against: RankRun, one rank of a strategy run
/// (its communicator, the run, the knobs, the losses and parameters it reports
/// back), PhaseInfo for the timeline and the modeled fabric, and Diverged.
///
/// A strategy is a function template over the element type:
///
///     template <TrainElement T>
///     void ddp_bucketed(dtw::train::RankRun<T>& run);   // in the contract header
///
/// Inside, a rank builds a Replica, trains spec().steps steps, calls
/// record_loss(step, global mean loss) after each and report(replica) at the
/// end. How it is registered is in strategy_registry.h; how the harness runs,
/// checks and measures it is in harness.h.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/model/trainer.h"
#include "dtw/trace.h"
#include "dtw/train/knobs.h"
#include "dtw/train/replica.h"
#include "dtw/train/run_spec.h"
#include "dtw/types.h"

namespace dtw::train {

/// A run whose loss stopped being finite: RankRun::record_loss stops it at the
/// first such step, naming the step (counted from 1, as the progress line
/// counts), the loss and the learning rate. A run that failed (dtw exits 3).
class Diverged : public Error {
 public:
  using Error::Error;
  /// "Diverged".
  const char* kind() const override { return "Diverged"; }
};

/// What a compute or communication phase of a strategy is, for the timeline
/// (stage and micro-batch in its lane) and the modeled fabric (FLOPs and bytes
/// it would take on another device). −1: not applicable.
struct PhaseInfo {
  int stage = -1;        ///< pipeline stage, or −1
  int micro_batch = -1;  ///< micro-batch, or −1
  double flops = 0;      ///< floating-point work (matrix products): Replica::pass_cost
  double bytes = 0;      ///< memory traffic of the rest (element-wise work)
  /// A compute phase (the timeline and the fabric count it); false for a
  /// label around communication (`{.compute = false}`), whose messages are
  /// traced on their own.
  bool compute = true;
};

/// One rank of a strategy run: the communicator, the run, the knobs, and
/// what the rank reports back.
template <TrainElement T>
class RankRun {
 public:
  /// Made by the harness (tests may make one to call a strategy directly).
  /// Keeps its own copies of `spec` and `knobs`, so either may be a
  /// temporary. Installs the rank's work clock in the communicator's tracer
  /// (the FLOPs of layer_times(), so the modeled fabric places calls made
  /// inside a compute phase by work done, not by this machine's time); the
  /// destructor removes it unless another RankRun has installed its own
  /// since. `comm` may be destroyed before this RankRun.
  RankRun(Comm& comm, RunSpec spec, Knobs knobs);
  ~RankRun();
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  /// This rank's communicator (the whole world of the run).
  Comm& comm() { return comm_; }
  /// The run; spec().dtype matches T.
  const RunSpec& spec() const { return spec_; }
  /// The strategy's parameters.
  const Knobs& knobs() const { return knobs_; }
  /// The rank's Exec (host, with its memory ledger): where Replicas and Arrays go.
  const Exec& exec() const { return comm_.exec(); }

  /// Records the global mean loss of step `step` (0-based, in order), on
  /// every rank that knows it (a pipeline's last stage, every DDP rank). The
  /// harness compares the losses with the reference's, and the progress bar
  /// shows world rank 0's. A loss that is not finite stops the run there:
  /// Diverged, naming the step and the loss (training on through NaN would
  /// end with a "result" that is not one).
  void record_loss(std::int64_t step, double loss);
  /// Records the losses of the steps a checkpoint already took (steps 0 ...
  /// losses.size() − 1), before any step of this run: a resumed run's log
  /// continues where it stopped, but these steps are not computed again, so
  /// they do not move the progress bar and resumed_steps() says how many.
  void record_resumed(std::span<const double> losses);
  /// Steps taken from a checkpoint (record_resumed), not computed by this run.
  std::int64_t resumed_steps() const { return resumed_steps_; }
  /// Hands over the final parameters [begin, begin + params.size()) this rank
  /// holds; call once per piece (or use report(replica)). Copied.
  void report_params(std::span<const T> params, std::int64_t begin);
  /// Reports every parameter piece `replica` holds at its offsets in the whole
  /// model (a shard's slices placed through their views: Replica::whole_params).
  void report(Replica<T>& replica);

  /// Marks a phase of the timeline that lasts as long as the returned object
  /// (Tracer::Phase with the stage, micro-batch, FLOPs and bytes of `info`).
  /// Give compute phases their FLOPs and bytes (Replica::pass_cost,
  /// optimizer_cost): the modeled fabric times them from these.
  [[nodiscard]] Tracer::Phase phase(std::string name, const PhaseInfo& info = {});

  // ---- read by the harness ----
  /// Losses recorded so far.
  const std::vector<double>& losses() const { return losses_; }
  /// Reported pieces: (begin, values).
  const std::vector<std::pair<std::int64_t, std::vector<T>>>& reported() const { return reported_; }
  /// Called by record_loss on world rank 0 (the progress bar).
  std::function<void(const model::StepInfo&)> on_step;
  /// Per-layer times to record on this rank (`replica.set_times(run.layer_times())`):
  /// the harness's on world rank 0 (dtw train prints them), the rank's own
  /// elsewhere. Never null: its FLOPs are the rank's work clock.
  model::LayerTimes* layer_times() const { return layer_times_ ? layer_times_ : own_times_.get(); }
  /// Set by the harness (nullptr: the rank's own).
  void set_layer_times(model::LayerTimes* times) { layer_times_ = times; }

 private:
  Comm& comm_;
  // Copies: a RankRun made from a temporary RunSpec or Knobs (a test's
  // `RankRun<double> run(comm, standard_run("gpt-tiny"), {})`) outlives them.
  RunSpec spec_;
  Knobs knobs_;
  std::vector<double> losses_;
  std::int64_t resumed_steps_ = 0;
  std::vector<std::pair<std::int64_t, std::vector<T>>> reported_;
  std::chrono::steady_clock::time_point last_step_;
  model::LayerTimes* layer_times_ = nullptr;
  // comm_'s tracer. comm_ may go first (a sub-communicator), the tracer does
  // not: every communicator of the rank shares it, the world's included.
  Tracer* tracer_;
  std::unique_ptr<model::LayerTimes> own_times_ = std::make_unique<model::LayerTimes>();
};

}  // namespace dtw::train
