#pragma once
/// @file
/// The registry of strategies: what a chapter declares once per strategy
/// (Strategy: its rank function, knobs, worlds, formulas and checks),
/// DTW_REGISTER_STRATEGY, the lookup by name, and the checks of a strategy
/// against a run before any rank runs.
///
/// A chapter registers each strategy once, in a source file of the chapter's
/// DEMOS (which the dtw program and `dtw bench train` link):
///
///     DTW_REGISTER_STRATEGY({.name = "ddp-bucketed", .chapter = "02",
///                            .description = "DDP, buckets overlapped with backward",
///                            .run = [](auto& run) { dtw::ch02::ddp_bucketed(run); },
///                            .bytes_formula = [](const dtw::train::FormulaInput& in) {...}});

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/memory.h"
#include "dtw/train/knobs.h"
#include "dtw/train/rank_run.h"
#include "dtw/train/run_spec.h"

namespace dtw::train {

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

}  // namespace dtw::train

#define DTW_STRATEGY_CONCAT2(a, b) a##b
#define DTW_STRATEGY_CONCAT(a, b) DTW_STRATEGY_CONCAT2(a, b)
/// Registers a strategy at static-initialisation time:
/// `DTW_REGISTER_STRATEGY({.name = "ddp", .chapter = "02", .run = ...});`
#define DTW_REGISTER_STRATEGY(...)                                                   \
  static const bool DTW_STRATEGY_CONCAT(dtw_strategy_registered_, __LINE__) = \
      ::dtw::train::register_strategy(::dtw::train::Strategy __VA_ARGS__)
