#pragma once
/// @file
/// Training strategies: rank functions registered by name, and the one
/// harness that runs, checks and measures any of them.
///
/// A chapter writes each strategy as a function template over the element
/// type and registers it once (in a source file of the chapter's DEMOS, which
/// the dtw program and `dtw bench train` link):
///
///     template <TrainElement T>
///     void ddp_bucketed(dtw::train::RankRun<T>& run);   // in the contract header
///
///     DTW_REGISTER_STRATEGY({.name = "ddp-bucketed", .chapter = "02",
///                            .description = "DDP, buckets overlapped with backward",
///                            .run = [](auto& run) { dtw::ch02::ddp_bucketed(run); },
///                            .bytes_formula = [](const dtw::train::FormulaInput& in) {...}});
///
/// Inside, a rank builds a Replica, trains spec().steps steps, calls
/// record_loss(step, global mean loss) after each and report(replica) at the
/// end; the harness compares what was reported with the reference on that
/// rank (so it works on every backend, MPI included) and gathers every
/// rank's outcome.

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/comm.h"
#include "dtw/launch.h"
#include "dtw/memory.h"
#include "dtw/model/trainer.h"
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

/// Strategy parameters from the command line (`--set bucket_kib=64`) or a test.
class Knobs {
 public:
  Knobs() = default;
  /// From "key=value" strings; InvalidArgument for one without '=' and for a
  /// key given twice (`--set check_every=1 --set check_every=2`: which one
  /// was meant?), naming the key and both values.
  static Knobs parse(const std::vector<std::string>& assignments);
  /// Sets `key` to `value`.
  Knobs& set(const std::string& key, const std::string& value);
  /// True when `key` was given.
  bool has(std::string_view key) const;
  /// The value of `key`, or `fallback`.
  std::string get(std::string_view key, std::string_view fallback) const;
  /// The integer value of `key`, or `fallback`; InvalidArgument naming the key
  /// when the value is not an integer.
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  /// The number value of `key`, or `fallback` (InvalidArgument likewise).
  double get_double(std::string_view key, double fallback) const;
  /// "bucket_kib=64 micro_batches=8" (empty when none).
  std::string describe() const;
  /// The keys given, in sorted order.
  std::vector<std::string> keys() const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
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
  /// Installs the rank's work clock in the communicator's tracer (the FLOPs
  /// of layer_times(), so the modeled fabric places calls made inside a
  /// compute phase by work done, not by this machine's time); the destructor
  /// removes it unless another RankRun has installed its own since. `comm`
  /// may be destroyed before this RankRun.
  RankRun(Comm& comm, const RunSpec& spec, const Knobs& knobs);
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
  /// Reports every parameter piece `replica` holds.
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
  const RunSpec& spec_;
  const Knobs& knobs_;
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

/// A strategy's rank function for float and for double, made from one
/// generic callable: `[](auto& run) { my_strategy(run); }`.
struct RankFunctions {
  std::function<void(RankRun<float>&)> f32;   ///< float runs
  std::function<void(RankRun<double>&)> f64;  ///< double runs
  RankFunctions() = default;
  /// From a callable taking RankRun<float>& and RankRun<double>&.
  template <class F>
  RankFunctions(F f) : f32(f), f64(f) {}  // NOLINT: implicit on purpose
};

/// What a strategy's formulas are computed from (FormulaInput::of).
struct FormulaInput {
  const RunSpec& spec;   ///< the run
  int ranks = 1;         ///< world size
  const Knobs& knobs;    ///< the strategy's parameters
  std::int64_t params = 0;  ///< Ψ: parameters of the model
  std::int64_t element_bytes = 4;  ///< bytes per value in spec.dtype
  /// Bytes a forward of the whole model keeps for one sequence (GPT) or one
  /// row (MLP) in spec.dtype: activations scale linearly with the rows.
  double activation_bytes_per_row = 0;

  /// The input for `spec` on `ranks` ranks (Ψ and the activation size computed).
  static FormulaInput of(const RunSpec& spec, int ranks, const Knobs& knobs);
};

/// Bytes per memory category (MemoryCategory order); NaN where there is no formula.
using MemoryFigures = std::array<double, kMemoryCategories>;
/// A MemoryFigures of NaN everywhere.
MemoryFigures no_memory_figures();

/// A knob a strategy reads: a key `--set KEY=VALUE` may give it. Only the
/// name is checked here (check_strategy refuses a key the strategy does not
/// declare); the value is checked by the strategy's own check hook, with the
/// function its rank function reads the knobs with.
struct Knob {
  std::string name;           ///< the key, e.g. "bucket_kib"
  std::string default_value;  ///< the default as `dtw train --list` shows it: "1", "none", "2p"
  std::string help;           ///< one line: what it sets, its unit, what it accepts
  /// The default in force for a run where it depends on the run (the model,
  /// the ranks, another knob); null: default_value. What the header prints.
  std::function<std::string(const RunSpec& spec, int ranks, const Knobs& knobs)> default_for;
};

/// A registered strategy.
struct Strategy {
  std::string name;         ///< what --strategy takes, e.g. "ddp-bucketed"
  std::string chapter;      ///< "02"; "" for the training layer's own
  std::string description;  ///< one line for `dtw train --list`
  /// The knobs it reads, in the order `dtw train --list` and the run's header
  /// show them; check_strategy refuses any other key (empty: it takes none).
  std::vector<Knob> knobs;
  int min_ranks = 1;        ///< smallest world it accepts
  int max_ranks = 1 << 20;  ///< largest world it accepts
  RankFunctions run;        ///< the rank function
  /// Bytes the busiest rank sends per step by the chapter's formula (null: none).
  std::function<double(const FormulaInput&)> bytes_formula;
  /// Peak bytes per category of the busiest rank by formula (null: none).
  std::function<MemoryFigures(const FormulaInput&)> peak_formula;
  /// The bubble fraction by formula (null: none).
  std::function<double(const FormulaInput&)> bubble_formula;
  /// Whether a run on `ranks` ranks with `knobs` reproduces the reference, so
  /// that the harness compares it; null: always. Asynchronous training
  /// applies gradients in the order they arrive, which no single-device run
  /// reproduces: such a strategy returns false except where it degenerates
  /// to synchronous training (one worker, a staleness bound of 0), and its
  /// tests check what it promises instead.
  std::function<bool(int ranks, const Knobs& knobs)> reproduces_reference;
  /// Checks, before any rank runs, everything about `knobs` that the rank
  /// function would refuse at its start: their values and how they fit `spec`
  /// on `ranks` ranks (the batch against ranks × micro-batches, the model's
  /// units against stages, ...). InvalidArgument naming the values. It calls
  /// the very functions the rank function checks with, so the two cannot
  /// disagree, and it is cheap: no message, no training. Null: nothing beyond
  /// [min_ranks, max_ranks]. Called through check_strategy.
  std::function<void(const RunSpec& spec, int ranks, const Knobs& knobs)> check;

  /// reproduces_reference(ranks, given), true when it is null.
  bool reproduces(int ranks, const Knobs& given) const {
    return !reproduces_reference || reproduces_reference(ranks, given);
  }
};

/// Every registered strategy: "single" first, then in registration order.
const std::vector<Strategy>& strategies();
/// Registers `strategy`; returns true so it can initialise a static.
bool register_strategy(Strategy strategy);
/// The strategy called `name`; InvalidArgument listing the known names.
const Strategy& find_strategy(std::string_view name);

/// Checks, without running anything, that `strategy` can run `spec` on
/// `ranks` ranks with `knobs`: spec.validate() (InvalidArgument as it raises
/// it), then that every key of `knobs` is one of Strategy::knobs (an unknown
/// key is named with the strategy's knobs, and the nearest one when it looks
/// like a typo: "unknown knob 'bucket_kb' (did you mean bucket_kib?)"), the
/// world inside [min_ranks, max_ranks] and Strategy::check,
/// whose InvalidArgument comes back prefixed with the strategy, the ranks, the
/// model, the batch and the knobs: "strategy ddp-accumulate on 8 ranks,
/// gpt-tiny, batch 8: a global batch of 8 rows cannot feed 8 ranks x 4
/// micro-batches ...". run_strategy calls it first; `dtw bench train` calls it
/// for every row before the first row runs.
void check_strategy(const Strategy& strategy, const RunSpec& spec, int ranks, const Knobs& knobs);

/// Every knob of `strategy` in force for a run of `spec` on `ranks` ranks
/// with `knobs`: the given value, else the default (Knob::default_for, else
/// Knob::default_value), as "bucket_kib=25 check_every=1" in declaration
/// order; "" for a strategy without knobs. For the run's header: a default
/// may read "none", which is not a value the knob accepts.
std::string knobs_in_force(const Strategy& strategy, const RunSpec& spec, int ranks,
                           const Knobs& knobs);

/// How the harness runs a strategy.
struct HarnessOptions {
  int ranks = 1;                   ///< world size
  std::string backend = "threads";  ///< launch backend
  bool trace = false;              ///< record the trace (timeline, fabric)
  std::int64_t memory_cap = 0;     ///< per-rank ledger cap in bytes (0: none)
  std::chrono::milliseconds timeout{120'000};  ///< per blocking call
  Knobs knobs;                     ///< the strategy's parameters
  bool compare = true;             ///< compare with the reference on every rank
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
  double seconds = 0;           ///< wall time of its rank function
  std::vector<double> losses;   ///< the losses it recorded
  std::int64_t resumed_steps = 0;  ///< of them, taken from a checkpoint (RankRun::record_resumed)
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
  double seconds = 0;                ///< slowest rank's wall time of the training
  /// Steps a checkpoint had taken (resumed, not computed by this run; the
  /// most over the ranks): spec.steps − resumed_steps steps ran in `seconds`.
  std::int64_t resumed_steps = 0;
};

/// Runs `fn` on opts.ranks ranks for `spec` (in T; spec.dtype is set to
/// match), then, on every rank, compares what it reported with the reference
/// and shares every rank's outcome with every rank (so an MPI process can
/// assert on it). Errors from a rank propagate as from dtw::launch; `spec` is
/// validated first.
template <TrainElement T>
RunOutcome run_ranks(const RunSpec& spec, const HarnessOptions& opts,
                     const std::function<void(RankRun<T>&)>& fn);
/// Runs a registered strategy in spec.dtype after check_strategy (which
/// raises InvalidArgument, before any rank runs, for a world outside
/// [min_ranks, max_ranks] or knobs that Strategy::check refuses).
RunOutcome run_strategy(const Strategy& strategy, const RunSpec& spec, const HarnessOptions& opts);

}  // namespace dtw::train

#define DTW_STRATEGY_CONCAT2(a, b) a##b
#define DTW_STRATEGY_CONCAT(a, b) DTW_STRATEGY_CONCAT2(a, b)
/// Registers a strategy at static-initialisation time:
/// `DTW_REGISTER_STRATEGY({.name = "ddp", .chapter = "02", .run = ...});`
#define DTW_REGISTER_STRATEGY(...)                                                   \
  static const bool DTW_STRATEGY_CONCAT(dtw_strategy_registered_, __LINE__) = \
      ::dtw::train::register_strategy(::dtw::train::Strategy __VA_ARGS__)
