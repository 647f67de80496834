// The strategy registry ("single" first), the formulas' input, and the checks
// of a strategy against a run before any rank runs: its knobs by name, its
// world, its own check hook.
#include "dtw/train/strategy_registry.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/model/units.h"
#include "dtw/train/network.h"

namespace dtw::train {

FormulaInput FormulaInput::of(const RunSpec& spec, int ranks, const Knobs& knobs) {
  const model::ModelConfig config = spec.config();
  const bool f64 = spec.dtype == DType::kFloat64;
  FormulaInput in{spec, ranks, knobs, model::param_layout(config).size(), f64 ? 8 : 4, 0};
  Batch one;
  one.rows = 1;
  one.seq_len = spec.sequence();
  const model::UnitRange all{
      0, static_cast<int>(model::model_units(config, model::param_layout(config)).size())};
  in.activation_bytes_per_row = static_cast<double>(
      f64 ? Network<double>::make(config)->activation_bytes(all, one)
          : Network<float>::make(config)->activation_bytes(all, one));
  return in;
}

MemoryFigures no_memory_figures() {
  MemoryFigures f;
  f.fill(std::nan(""));
  return f;
}

namespace {

// The single-device reference as a strategy: the baseline row of every table.
template <class T>
void single_device(RankRun<T>& run) {
  DTW_CHECK_ARG(run.comm().size() == 1,
                "strategy single runs on one rank, not " << run.comm().size());
  const RunSpec& spec = run.spec();
  Replica<T> replica(spec, run.exec(), ReplicaPlan::whole(spec));
  replica.set_times(run.layer_times());
  const Cost pass = replica.pass_cost(replica.network().all(), make_batch(spec, 0), true);
  const Cost opt = replica.optimizer_cost();
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = replica.forward_backward(step, 0, 1);
    }
    {
      auto phase = run.phase("optimizer", {.flops = opt.flops, .bytes = opt.bytes});
      model::ScopedLayerTimer timer(run.layer_times(), "optimizer");
      replica.clip(replica.local_sum_of_squares());
      replica.step(step);
    }
    run.record_loss(step, loss);
  }
  run.report(replica);
}

MemoryFigures single_peak(const FormulaInput& in) {
  MemoryFigures f = no_memory_figures();
  const double psi = static_cast<double>(in.params * in.element_bytes);
  const bool adam = in.spec.optimizer == model::Optimizer::kAdamW;
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = adam ? 2 * psi : psi;
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] =
      in.activation_bytes_per_row * static_cast<double>(in.spec.batch);
  f[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = 0;
  return f;
}

struct Registry {
  std::mutex mutex;
  std::vector<Strategy> all;
  std::vector<std::string> duplicates;
  Registry() {
    all.push_back({.name = "single",
                   .chapter = "",
                   .description = "the reference: one device, the whole batch",
                   .min_ranks = 1,
                   .max_ranks = 1,
                   .run = [](auto& run) { single_device(run); },
                   .bytes_formula = [](const FormulaInput&) { return 0.0; },
                   .peak_formula = single_peak,
                   .bubble_formula = nullptr});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const std::vector<Strategy>& strategies() { return registry().all; }

bool register_strategy(Strategy strategy) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const Strategy& s : r.all) {
    if (s.name == strategy.name) {
      r.duplicates.push_back(strategy.name + " (chapters " + s.chapter + " and " +
                             strategy.chapter + ")");
      return false;
    }
  }
  r.all.push_back(std::move(strategy));
  return true;
}

const Strategy& find_strategy(std::string_view name) {
  Registry& r = registry();
  for (const std::string& d : r.duplicates)
    DTW_CHECK_ARG(d.rfind(std::string(name) + " ", 0) != 0,
                  "strategy " << name << " is registered twice: " << d);
  std::string known;
  for (const Strategy& s : r.all) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  DTW_CHECK_ARG(false, "unknown strategy '" << name << "'; known: " << known);
  return r.all.front();
}

// ---- checks before a run --------------------------------------------------------

namespace {

// Edit distance (insertions, deletions, substitutions), for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Refuses a key `strategy` does not declare: a typo must not run the default.
void check_knob_names(const Strategy& strategy, const Knobs& knobs) {
  std::string known;
  for (const Knob& k : strategy.knobs) known += (known.empty() ? "" : ", ") + k.name;
  for (const std::string& key : knobs.keys()) {
    const auto declared = [&](const Knob& k) { return k.name == key; };
    if (std::any_of(strategy.knobs.begin(), strategy.knobs.end(), declared)) continue;
    std::string nearest;
    std::size_t best = std::max<std::size_t>(2, key.size() / 3) + 1;
    for (const Knob& k : strategy.knobs) {
      const std::size_t d = edit_distance(key, k.name);
      if (d < best) best = d, nearest = k.name;
    }
    DTW_CHECK_ARG(!known.empty(), "unknown knob '" << key << "': " << strategy.name
                                                   << " takes no knobs");
    DTW_CHECK_ARG(false, "unknown knob '" << key << "'"
                             << (nearest.empty() ? "" : " (did you mean " + nearest + "?)") << "; "
                             << strategy.name << "'s knobs are " << known
                             << " (dtw train --list describes them)");
  }
}

}  // namespace

std::string knobs_in_force(const Strategy& strategy, const RunSpec& spec, int ranks,
                           const Knobs& knobs) {
  std::string s;
  for (const Knob& k : strategy.knobs) {
    const std::string value = knobs.has(k.name) ? knobs.get(k.name, "")
                              : k.default_for  ? k.default_for(spec, ranks, knobs)
                                               : k.default_value;
    s += (s.empty() ? "" : " ") + k.name + "=" + value;
  }
  return s;
}

void check_strategy(const Strategy& strategy, const RunSpec& spec, int ranks, const Knobs& knobs) {
  spec.validate();  // the run's own fault, not the strategy's: no prefix
  try {
    check_knob_names(strategy, knobs);
    // "on exactly 1 rank", "on at least 2 ranks" (no bound but the default
    // 2^20), "on 2 to 8 ranks".
    std::ostringstream worlds;
    if (strategy.min_ranks == strategy.max_ranks)
      worlds << "exactly " << strategy.min_ranks << (strategy.min_ranks == 1 ? " rank" : " ranks");
    else if (strategy.max_ranks == Strategy{}.max_ranks)
      worlds << "at least " << strategy.min_ranks << (strategy.min_ranks == 1 ? " rank" : " ranks");
    else
      worlds << strategy.min_ranks << " to " << strategy.max_ranks << " ranks";
    DTW_CHECK_ARG(ranks >= strategy.min_ranks && ranks <= strategy.max_ranks,
                  "it runs on " << worlds.str() << ", not " << ranks);
    if (strategy.check) strategy.check(spec, ranks, knobs);
  } catch (const InvalidArgument& e) {
    const std::string set = knobs.describe();
    std::ostringstream who;
    who << "strategy " << strategy.name << " on " << ranks << (ranks == 1 ? " rank, " : " ranks, ")
        << spec.model << ", batch " << spec.batch << (set.empty() ? "" : ", " + set) << ": ";
    // The message, not what(): a command line prints it as a usage error,
    // which names no source location (issue 29).
    InvalidArgument wrapped(who.str() + e.message());
    for (const std::string& note : e.notes()) wrapped.add_note(note);
    throw wrapped;
  }
}

}  // namespace dtw::train
