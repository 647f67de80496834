// dtw bench tensor-parallelism: why tensor parallelism stays inside a node.
// Each strategy trains the model once on this machine (the trace records
// every message and every compute phase with its FLOPs), then the trace is
// replayed on two fabrics: one DGX node (NVLink, every rank in the node) and
// the same GPUs one per node on InfiniBand (every message crosses a NIC).
// Beside them, the bytes and messages each rank sent per step, measured and
// by the chapter's formula.
//
//   dtw bench tensor-parallelism [--model gpt-small] [--ranks 2,4]
//                                [--strategies tp,tp-sp,ddp-bucketed] [--steps 2] [--batch 8]
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/errors.h"
#include "dtw/train/fabric.h"
#include "dtw/train/strategy.h"
#include "exit_codes.h"

namespace {

using namespace dtw;
using namespace dtw::train;

// ib-2x8's GPUs and NICs with one rank per node: every message is inter-node.
Cluster one_gpu_per_node() {
  Cluster c = find_gpu_cluster("ib-2x8");
  c.name = "ib-1-per-node";
  c.ranks_per_node = 1;
  return c;
}

void row(const Strategy& strategy, const RunSpec& spec, int p) {
  HarnessOptions o;
  o.ranks = p;
  o.trace = true;
  o.compare = false;  // the tests check the values; this measures
  const RunOutcome out = run_strategy(strategy, spec, o);
  std::int64_t bytes = 0, messages = 0;
  for (int q = 0; q < p; ++q) {
    bytes += out.report.traffic.bytes(0, q);
    messages += out.report.traffic.messages(0, q);
  }
  const double steps = static_cast<double>(spec.steps);
  const double formula = strategy.bytes_formula
                             ? strategy.bytes_formula(FormulaInput::of(spec, p, o.knobs))
                             : NAN;
  const Replay nvlink = replay_on(out.report.trace, p, find_gpu_cluster("nvlink-8"));
  const Replay ib = replay_on(out.report.trace, p, one_gpu_per_node());
  const double tokens = static_cast<double>(spec.batch * spec.sequence());
  // "not computing": the share of the modeled step the devices wait (1 − compute / span).
  fmt::print("{:<13} {:>5} {:>8.1f} {:>10.1f} {:>10.1f} {:>6.0f} {:>10.1f} {:>6.0f}% {:>10.1f} {:>6.0f}%\n",
             strategy.name, p, tokens * steps / out.seconds / 1e3,
             static_cast<double>(bytes) / steps / 1024, formula / 1024,
             static_cast<double>(messages) / steps, nvlink.seconds / steps * 1e6,
             100 * nvlink.timeline.bubble, ib.seconds / steps * 1e6, 100 * ib.timeline.bubble);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dtw bench tensor-parallelism: TP on one node's NVLink against one GPU per node",
               "dtw bench tensor-parallelism");
  std::string model = "gpt-small", strategies = "tp,tp-sp,ddp-bucketed";
  std::vector<int> worlds = {2, 4};
  std::int64_t steps = 2, batch = 8;
  app.add_option("--model", model, "gpt-tiny or gpt-small")->capture_default_str();
  app.add_option("--strategies", strategies, "comma-separated registered strategies")
      ->capture_default_str();
  cli::add_int_list(app, "--ranks", worlds, "comma-separated world sizes", {1, 64});
  cli::add_int(app, "--steps", steps, "steps per run", {1, 1000});
  cli::add_int(app, "--batch", batch, "global batch (sequences)", {1, 4096});
  return cli::bench_main(app, argc, argv, [&] {
    RunSpec spec = standard_run(model);
    spec.steps = steps;
    spec.batch = batch;
    spec.validate();
    std::vector<std::string> known;
    for (const Strategy& s : dtw::train::strategies()) known.push_back(s.name);
    const std::vector<std::string> names = cli::parse_name_list("--strategies", strategies, known);
    for (const std::string& n : names)
      for (int p : worlds) check_strategy(find_strategy(n), spec, p, {});  // before any run
    cli::print_rows_code();
    fmt::print("{}, batch {} x {} tokens, {}, {} steps; rank 0's traffic per step; modeled step "
               "time on nvlink-8 (one DGX A100) and on ib-1-per-node (ib-2x8's GPUs, one per "
               "node: every message on InfiniBand)\n",
               model, spec.batch, spec.sequence(), name_of(spec.dtype), spec.steps);
    fmt::print("{:<13} {:>5} {:>8} {:>10} {:>10} {:>6} {:>10} {:>7} {:>10} {:>7}\n", "strategy",
               "ranks", "ktok/s", "KiB/step", "formula", "msgs", "nvlink us", "waits", "ib us",
               "waits");
    for (int p : worlds)
      for (const std::string& n : names) row(find_strategy(n), spec, p);
    return cli::kExitOk;
  });
}
