// dtw bench train's rows (train_rows.h): a strategy's run measured beside its
// formulas, and the table.
#include "train_rows.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dtw/memory.h"
#include "dtw/train/timeline.h"

namespace dtw::bench {
namespace {

using nlohmann::json;
using namespace dtw::train;

const char* kCategoryKeys[] = {"parameters", "gradients", "optimizer_state",
                               "activations", "comm_buffers", "other"};

json maybe(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string bytes_cell(const json& v) {
  return v.is_null() ? "-" : format_bytes(static_cast<std::int64_t>(v.get<double>()));
}
std::string fraction_cell(const json& v) {
  return v.is_null() ? "-" : fmt::format("{:.0f}%", 100 * v.get<double>());
}
std::string diff_cell(const json& v) {
  return v.is_null() ? "-" : fmt::format("{:.2g}", v.get<double>());
}
std::string peak_cell(const json& v) {
  if (v.is_null()) return "-";
  double sum = 0;
  bool any = false;
  for (const auto& [k, x] : v.items())
    if (!x.is_null()) {
      sum += x.get<double>();
      any = true;
    }
  return any ? format_bytes(static_cast<std::int64_t>(sum)) : "-";
}

}  // namespace

std::string timeline_stem(const std::string& svg_stem, const std::string& strategy, int ranks,
                          std::string label) {
  std::replace(label.begin(), label.end(), ' ', '-');
  label.erase(std::remove(label.begin(), label.end(), '='), label.end());
  return svg_stem + "-" + strategy + "-p" + std::to_string(ranks) + label;
}

Row run_row(const Strategy& strategy, const RunSpec& spec, int ranks, const std::string& backend,
            const std::string& device, const Knobs& knobs, const Cluster& fabric,
            const std::string& svg_stem, const std::string& label_suffix) {
  HarnessOptions o;
  o.ranks = ranks;
  o.backend = backend;
  o.device = device;
  o.trace = true;
  o.knobs = knobs;
  std::vector<double> step_seconds;
  o.on_step = [&](const model::StepInfo& s) { step_seconds.push_back(s.seconds); };
  const RunOutcome out = run_strategy(strategy, spec, o);
  const Report& rep = out.report;
  // Steps after the first (which warms caches and allocators up), median.
  std::vector<double> steady(step_seconds.begin() + (step_seconds.size() > 1 ? 1 : 0),
                             step_seconds.end());
  std::sort(steady.begin(), steady.end());
  const double step_s = steady.empty() ? out.seconds / static_cast<double>(spec.steps)
                                       : steady[steady.size() / 2];
  std::int64_t busiest_bytes = 0;
  for (int r = 0; r < rep.traffic.world_size(); ++r)
    busiest_bytes = std::max(busiest_bytes, rep.traffic.bytes_sent(r));
  const MemorySnapshot* busiest = nullptr;
  for (const MemorySnapshot& m : rep.memory)
    if (busiest == nullptr || m.peak_total > busiest->peak_total) busiest = &m;
  const FormulaInput in = FormulaInput::of(spec, ranks, knobs);
  json peak = json::object(), peak_formula = nullptr;
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    peak[kCategoryKeys[c]] = busiest ? busiest->peak[c] : 0;
  if (strategy.peak_formula) {
    peak_formula = json::object();
    const MemoryFigures f = strategy.peak_formula(in);
    for (std::size_t c = 0; c < kMemoryCategories; ++c) peak_formula[kCategoryKeys[c]] = maybe(f[c]);
  }
  const Timeline measured = analyze_timeline(rep.trace, ranks);
  const Replay modeled = replay_on(rep.trace, ranks, fabric);
  const bool stages = measured.has_stages;
  Row r;
  r.mismatch = out.mismatch;
  r.j = {
      {"strategy", strategy.name},
      {"label", strategy.name + label_suffix},
      {"knobs", knobs.describe()},
      {"ranks", ranks},
      {"backend", rep.backend},
      {"device", device.empty() ? "host" : device},
      {"model", spec.model},
      {"dtype", name_of(spec.dtype)},
      {"steps", spec.steps},
      {"tokens_per_s", static_cast<double>(spec.tokens_per_step()) / step_s},
      {"step_s", step_s},
      {"bytes_per_rank_step", static_cast<double>(busiest_bytes) / static_cast<double>(spec.steps)},
      {"bytes_formula", strategy.bytes_formula ? maybe(strategy.bytes_formula(in)) : json(nullptr)},
      {"peak_bytes", peak},
      {"peak_formula", peak_formula},
      {"bubble_measured", stages ? maybe(measured.bubble) : json(nullptr)},
      {"bubble_modeled", stages ? maybe(modeled.timeline.bubble) : json(nullptr)},
      {"bubble_formula",
       strategy.bubble_formula ? maybe(strategy.bubble_formula(in)) : json(nullptr)},
      {"overlap_measured", maybe(measured.overlap)},
      {"overlap_modeled", maybe(modeled.timeline.overlap)},
      {"modeled_step_s", modeled.seconds / static_cast<double>(spec.steps)},
      {"unmodeled_phases", modeled.unmodeled},
      {"fabric", fabric.name},
      // Null for a row not compared with the reference (Strategy::reproduces).
      {"max_abs_param_diff", out.checked ? json(out.max_abs_param_diff) : json(nullptr)},
      {"matches_reference", out.checked ? json(out.matches) : json(nullptr)},
      {"final_loss", out.losses.empty() ? json(nullptr) : json(out.losses.back())}};
  if (!svg_stem.empty()) {
    const std::string base = timeline_stem(svg_stem, strategy.name, ranks, label_suffix);
    write_timeline_svg(rep.trace, ranks, strategy.name + ", measured", base + ".svg");
    write_timeline_svg(modeled.events, ranks, strategy.name + ", modeled on " + fabric.name,
                       base + "-" + fabric.name + ".svg");
    fmt::print("wrote {0}.svg and {0}-{1}.svg (timelines)\n", base, fabric.name);
  }
  return r;
}

void print_table(const std::vector<Row>& rows) {
  fmt::print("\n{:<24} {:>5} {:>10} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>17} {:>13} {:>9} {:>8}\n",
             "strategy", "ranks", "tokens/s", "x", "step", "bytes/step", "(formula)", "peak mem",
             "(formula)", "bubble m/f/form", "overlap m/f", "max|dθ|", "loss");
  const double base = rows.front().j["tokens_per_s"].get<double>();
  for (const Row& r : rows) {
    const json& j = r.j;
    fmt::print("{:<24} {:>5} {:>10.0f} {:>6.2f} {:>8.1f}m {:>11} {:>11} {:>11} {:>11} {:>17} {:>13} {:>9} {:>8.4f}\n",
               j["label"].get<std::string>(), j["ranks"].get<int>(),
               j["tokens_per_s"].get<double>(), j["tokens_per_s"].get<double>() / base,
               1e3 * j["step_s"].get<double>(), bytes_cell(j["bytes_per_rank_step"]),
               bytes_cell(j["bytes_formula"]), peak_cell(j["peak_bytes"]),
               peak_cell(j["peak_formula"]),
               fraction_cell(j["bubble_measured"]) + "/" + fraction_cell(j["bubble_modeled"]) + "/" +
                   fraction_cell(j["bubble_formula"]),
               fraction_cell(j["overlap_measured"]) + "/" + fraction_cell(j["overlap_modeled"]),
               diff_cell(j["max_abs_param_diff"]),
               j["final_loss"].is_null() ? NAN : j["final_loss"].get<double>());
    if (!r.mismatch.empty()) fmt::print("  ! {}\n", r.mismatch);
  }
}

}  // namespace dtw::bench
