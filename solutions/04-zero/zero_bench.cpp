// dtw bench zero: per-rank memory of every stage against the world size, by
// category, measured by the ledger beside the stage's formula, as a table and
// a stacked bar chart (SVG). What `dtw bench train` shows for one world size,
// swept over several: where ZeRO's 1/p comes from, and what it leaves (the
// activations, the units in flight).
//
//   dtw bench zero [--model gpt-small] [--ranks 1,2,4,8] [--strategies ddp-bucketed,zero1,zero2,zero3]
//                  [--steps 1] [--svg zero-memory.svg]
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/errors.h"
#include "dtw/memory.h"
#include "dtw/output_file.h"
#include "dtw/train/strategy.h"
#include "exit_codes.h"

namespace {

using namespace dtw;
using namespace dtw::train;

// The categories drawn, bottom to top, and their colours.
constexpr std::array<MemoryCategory, 4> kDrawn = {
    MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizerState,
    MemoryCategory::kActivations};
constexpr std::array<const char*, 4> kColours = {"#4e79a7", "#f28e2b", "#e15759", "#bab0ac"};

struct Bar {
  std::string strategy;
  int ranks = 0;
  std::array<double, kMemoryCategories> measured{};  // rank 0's peaks, MiB
  double formula = NAN;  // the formula's model state (parameters, gradients, optimizer), MiB
};

Bar measure(const Strategy& strategy, const RunSpec& spec, int ranks) {
  HarnessOptions o;
  o.ranks = ranks;
  o.compare = false;  // memory only; the tests check the numbers
  const RunOutcome out = run_strategy(strategy, spec, o);
  Bar bar{strategy.name, ranks};
  const MemorySnapshot& m = out.report.memory.at(0);  // rank 0 owns the most
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    bar.measured[c] = static_cast<double>(m.peak[c]) / (1 << 20);
  if (strategy.peak_formula) {
    const MemoryFigures f = strategy.peak_formula(FormulaInput::of(spec, ranks, o.knobs));
    // Model state only: it is what every stage's formula covers (chapter 02's
    // DDP gives none for activations), and the bars stack it at the bottom.
    bar.formula = 0;
    for (std::size_t c = 0; c < 3; ++c) bar.formula += f[c] / (1 << 20);
  }
  return bar;
}

void write_svg(const std::vector<Bar>& bars, const std::vector<int>& worlds,
               const std::vector<std::string>& names, const std::string& title,
               const std::string& path) {
  double top = 1;
  for (const Bar& b : bars) {
    double sum = 0;
    for (MemoryCategory c : kDrawn) sum += b.measured[static_cast<std::size_t>(c)];
    top = std::max({top, sum, std::isfinite(b.formula) ? b.formula : 0.0});
  }
  // A round top for the axis: 1, 2 or 5 times a power of ten, in four steps.
  const double unit = std::pow(10.0, std::floor(std::log10(top / 4)));
  double step = unit;
  for (double k : {1.0, 2.0, 5.0, 10.0})
    if (top / 4 <= k * unit) { step = k * unit; break; }
  top = 4 * step;
  const double left = 70, bottom = 360, height = 300, bar_w = 22, gap = 6, group_gap = 40;
  const double group_w = static_cast<double>(names.size()) * (bar_w + gap);
  const double width = left + static_cast<double>(worlds.size()) * (group_w + group_gap) + 190;
  std::ostringstream svg;
  svg << fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="440" font-family="sans-serif" font-size="12">)svg", width)
      << fmt::format(R"svg(<rect width="100%" height="100%" fill="white"/><text x="{}" y="24" font-size="15">{}</text>)svg", left, title);
  for (int t = 0; t <= 4; ++t) {  // the axis and its grid
    const double v = top * t / 4, y = bottom - height * t / 4;
    svg << fmt::format(R"svg(<line x1="{}" x2="{:.0f}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)svg", left, width - 190, y, y)
        << fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:.0f} MiB</text>)svg", left - 6, y + 4, v);
  }
  for (std::size_t g = 0; g < worlds.size(); ++g) {
    const double x0 = left + 10 + static_cast<double>(g) * (group_w + group_gap);
    svg << fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle" font-weight="bold">p = {}</text>)svg", x0 + group_w / 2, bottom + 64, worlds[g]);
    for (std::size_t s = 0; s < names.size(); ++s) {
      const double x = x0 + static_cast<double>(s) * (bar_w + gap);
      for (const Bar& b : bars) {
        if (b.ranks != worlds[g] || b.strategy != names[s]) continue;
        double y = bottom;
        for (std::size_t k = 0; k < kDrawn.size(); ++k) {
          const double h = height * b.measured[static_cast<std::size_t>(kDrawn[k])] / top;
          y -= h;
          svg << fmt::format(R"svg(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{:.1f}" fill="{}"/>)svg", x, y, bar_w, h, kColours[k]);
        }
        if (std::isfinite(b.formula)) {  // the formula's model state: a black tick
          const double fy = bottom - height * b.formula / top;
          svg << fmt::format(R"svg(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="black" stroke-width="2"/>)svg", x - 3, x + bar_w + 3, fy, fy);
        }
      }
      svg << fmt::format(R"svg(<text transform="translate({:.1f},{}) rotate(-45)" text-anchor="end" font-size="10">{}</text>)svg", x + bar_w / 2, bottom + 12, names[s]);
    }
  }
  const double lx = width - 175;
  for (std::size_t k = 0; k < kDrawn.size(); ++k)
    svg << fmt::format(R"svg(<rect x="{:.0f}" y="{}" width="14" height="14" fill="{}"/><text x="{:.0f}" y="{}">{}</text>)svg", lx, 60 + 22 * k, kColours[k], lx + 20, 72 + 22 * k, name_of(kDrawn[k]));
  svg << fmt::format(R"svg(<line x1="{:.0f}" x2="{:.0f}" y1="{}" y2="{}" stroke="black" stroke-width="2"/><text x="{:.0f}" y="{}">formula: model state</text>)svg", lx, lx + 14, 60 + 22 * 4 + 7, 60 + 22 * 4 + 7, lx + 20, 72 + 22 * 4);
  svg << "</svg>\n";
  write_file(path, svg.str(), "--svg");  // throws when the write fails
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dtw bench zero: per-rank memory by category against the world size",
               "dtw bench zero");
  std::string model = "gpt-small", strategies = "ddp-bucketed,zero1,zero2,zero3";
  std::string svg;
  std::vector<int> worlds = {1, 2, 4, 8};
  std::int64_t steps = 1;
  app.add_option("--model", model, "mlp-tiny, gpt-tiny or gpt-small")->capture_default_str();
  app.add_option("--strategies", strategies, "comma-separated registered strategies")
      ->capture_default_str();
  cli::add_int_list(app, "--ranks", worlds, "comma-separated world sizes", {1, cli::kMaxRanks});
  cli::add_int(app, "--steps", steps, "steps per run (peaks do not change after the first)",
               {1, 1000000});
  cli::add_path(app, "--svg", svg, "write the stacked bar chart here");
  return cli::bench_main(app, argc, argv, [&] {
    RunSpec spec = standard_run(model);
    spec.steps = steps;
    spec.validate();
    std::vector<std::string> known;
    for (const Strategy& s : dtw::train::strategies()) known.push_back(s.name);
    const std::vector<std::string> names = cli::parse_name_list("--strategies", strategies, known);
    for (const int p : worlds)
      DTW_CHECK_ARG(p <= spec.batch, "--ranks " << p << ": the batch of " << spec.batch
                                                << " rows cannot be split over " << p << " ranks");
    if (!svg.empty()) check_writable(svg, "--svg");  // before anything is measured
    cli::print_rows_code();
    fmt::print("per-rank peak memory (rank 0), {} {}, batch {}, MiB\n", model, name_of(spec.dtype), spec.batch);
    fmt::print("{:<16} {:>5} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9} {:>9}\n", "strategy", "ranks",
               "parameters", "gradients", "optimizer", "activations", "total", "state", "formula");
    std::vector<Bar> bars;
    for (int p : worlds) {
      for (const std::string& n : names) {
        const Bar b = measure(find_strategy(n), spec, p);
        const double state = b.measured[0] + b.measured[1] + b.measured[2];
        fmt::print("{:<16} {:>5} {:>11.2f} {:>11.2f} {:>11.2f} {:>11.2f} {:>9.2f} {:>9.2f} {:>9.2f}\n", n,
                   p, b.measured[0], b.measured[1], b.measured[2], b.measured[3],
                   state + b.measured[3], state, b.formula);
        bars.push_back(b);
      }
    }
    if (!svg.empty()) {
      write_svg(bars, worlds, names,
                fmt::format("Per-rank peak memory, {} ({}, batch {}), by category", model,
                            name_of(spec.dtype), spec.batch),
                svg);
      fmt::print("wrote {}\n", svg);
    }
    return cli::kExitOk;
  });
}
