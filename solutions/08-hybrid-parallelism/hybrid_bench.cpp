// dtw bench hybrid-parallelism: every layout of a world, measured, replayed
// and predicted side by side. Each valid layout (ch08::valid_layouts: every
// pp × dp × tp of the world the model can cut, m = 2·pp, with and without
// ZeRO-1) trains the model once on this machine with the trace on and is
// compared with the single-device reference. Per layout:
//
//   ktok/s       tokens per second measured here (threads on this machine's CPUs)
//   nvlink us    the trace replayed on nvlink-8 (one 8-GPU node), per step
//   ib us        the trace replayed on ib-2x8 (8-GPU nodes on InfiniBand), per step
//   pred         the planner's prediction (ch08::predict) on each fabric, per step
//   tp/pp/dp KiB what crossed each axis per step, from the traffic record: a pair
//                of world ranks belongs to the axis in which their coordinates
//                differ (world rank = (stage · dp + replica) · tp + slice); "mixed"
//                is a pair that differs in more than one (the world's ring
//                allreduce of {Σ g², loss} between consecutive ranks)
//   peak MiB     the largest per-rank peak of the memory ledger (all categories)
//
// Best (smallest modeled nvlink-8 step) first.
//
//   dtw bench hybrid-parallelism [--model gpt-tiny] [--ranks 8] [--layouts all|2x2x2,1x4x2]
//                                [--steps 3] [--batch 16]
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/errors.h"
#include "dtw/train/fabric.h"
#include "dtw/train/strategy.h"
#include "exit_codes.h"
#include "hybrid_parallelism.h"

namespace {

using namespace dtw;
using namespace dtw::train;

// "2x2x2": pp x dp x tp, what --layouts takes.
std::string axes_of(const ch08::Layout& l) { return fmt::format("{}x{}x{}", l.pp, l.dp, l.tp); }

struct Row {
  ch08::Layout layout;
  double ktok_s = 0, nvlink_us = 0, ib_us = 0, pred_nvlink_us = 0, pred_ib_us = 0;
  std::array<double, 4> kib{};  // tp, pp, dp, mixed: per step
  double peak_mib = 0;
  bool matches = false;
  std::string mismatch;
};

// Bytes per step on each axis: every pair of world ranks by the coordinates
// in which they differ.
std::array<double, 4> bytes_per_axis(const RunOutcome& out, const ch08::Layout& l, double steps) {
  std::array<double, 4> kib{};
  const int p = l.ranks();
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b) {
      const std::int64_t bytes = out.report.traffic.bytes(a, b);
      if (a == b || bytes == 0) continue;
      const bool stage = a / (l.tp * l.dp) != b / (l.tp * l.dp);
      const bool replica = a / l.tp % l.dp != b / l.tp % l.dp, slice = a % l.tp != b % l.tp;
      const int differ = int(stage) + int(replica) + int(slice);
      const std::size_t axis = differ > 1 ? 3 : slice ? 0 : stage ? 1 : 2;
      kib[axis] += static_cast<double>(bytes) / steps / 1024;
    }
  return kib;
}

template <TrainElement T>
RunOutcome train_layout(const RunSpec& spec, const ch08::Layout& l) {
  HarnessOptions o;
  o.ranks = l.ranks();
  o.trace = true;
  return run_ranks<T>(spec, o, [&](RankRun<T>& run) { ch08::train_hybrid(run, l); });
}

Row measure(const RunSpec& spec, const ch08::Layout& l) {
  const RunOutcome out = spec.dtype == DType::kFloat64 ? train_layout<double>(spec, l)
                                                       : train_layout<float>(spec, l);
  const double steps = static_cast<double>(spec.steps);
  const Cluster& nvlink = find_gpu_cluster("nvlink-8");
  const Cluster& ib = find_gpu_cluster("ib-2x8");
  Row r{.layout = l};
  r.ktok_s = static_cast<double>(spec.batch * spec.sequence()) * steps / out.seconds / 1e3;
  r.nvlink_us = replay_on(out.report.trace, l.ranks(), nvlink).seconds / steps * 1e6;
  r.ib_us = replay_on(out.report.trace, l.ranks(), ib).seconds / steps * 1e6;
  r.pred_nvlink_us = ch08::predict(spec, l, nvlink).step_s * 1e6;
  r.pred_ib_us = ch08::predict(spec, l, ib).step_s * 1e6;
  r.kib = bytes_per_axis(out, l, steps);
  for (const MemorySnapshot& m : out.report.memory)
    r.peak_mib = std::max(r.peak_mib, static_cast<double>(m.peak_total) / (1 << 20));
  r.matches = out.matches;
  r.mismatch = out.mismatch;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dtw bench hybrid-parallelism: every pp × dp × tp layout, measured, replayed on two "
               "fabrics and predicted",
               "dtw bench hybrid-parallelism");
  std::string model = "gpt-tiny", layouts = "all";
  int ranks = 8;
  std::int64_t steps = 3, batch = 16;
  app.add_option("--model", model, "a registered model (gpt-tiny, gpt-small, ...)")->capture_default_str();
  cli::add_int(app, "--ranks", ranks, "world size", {1, 64});
  app.add_option("--layouts", layouts, "all, or comma-separated PPxDPxTP (each with and without ZeRO-1)")
      ->capture_default_str();
  cli::add_int(app, "--steps", steps, "steps per run", {1, 1000});
  cli::add_int(app, "--batch", batch, "global batch (sequences)", {1, 4096});
  return cli::bench_main(app, argc, argv, [&] {
    RunSpec spec = standard_run(model);
    spec.steps = steps;
    spec.batch = batch;
    spec.validate();
    // Every layout is chosen and checked before any run.
    std::vector<ch08::Layout> chosen = ch08::valid_layouts(spec, ranks, {}, true);
    DTW_CHECK_ARG(!chosen.empty(), "no layout of " << ranks << " ranks can train " << model
                                                   << " with a batch of " << batch);
    if (layouts != "all") {
      std::vector<std::string> known;
      for (const ch08::Layout& l : chosen)
        if (std::find(known.begin(), known.end(), axes_of(l)) == known.end()) known.push_back(axes_of(l));
      const std::vector<std::string> names = cli::parse_name_list("--layouts", layouts, known);
      std::erase_if(chosen, [&](const ch08::Layout& l) {
        return std::find(names.begin(), names.end(), axes_of(l)) == names.end();
      });
    }
    cli::print_rows_code();
    fmt::print("{}, {} ranks, batch {} x {} tokens, {}, {} steps; rows time "
               "train_hybrid (chapter 08) on threads; per step: modeled on nvlink-8 and ib-2x8 "
               "(replay of the trace) and predicted (ch08::predict); KiB sent per axis\n",
               model, ranks, spec.batch, spec.sequence(), name_of(spec.dtype), spec.steps);
    if (ranks <= find_gpu_cluster("ib-2x8").ranks_per_node)
      fmt::print("(ib-2x8 has {} ranks per node: on {} ranks every rank shares one node, so its "
                 "figures equal nvlink-8's; more ranks spread the pp and dp groups over nodes)\n",
                 find_gpu_cluster("ib-2x8").ranks_per_node, ranks);
    std::vector<Row> rows;
    for (const ch08::Layout& l : chosen) rows.push_back(measure(spec, l));
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& a, const Row& b) { return a.nvlink_us < b.nvlink_us; });
    fmt::print("{:<32} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>8} {:>5}\n",
               "layout", "ktok/s", "nvlink us", "pred", "ib us", "pred", "tp KiB", "pp KiB", "dp KiB",
               "mixed", "peak MiB", "ref");
    for (const Row& r : rows)
      fmt::print("{:<32} {:>8.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.1f} {:>9.1f} {:>9.1f} "
                 "{:>7.2f} {:>8.2f} {:>5}\n",
                 r.layout.describe(), r.ktok_s, r.nvlink_us, r.pred_nvlink_us, r.ib_us, r.pred_ib_us,
                 r.kib[0], r.kib[1], r.kib[2], r.kib[3], r.peak_mib, r.matches ? "ok" : "DIFF");
    for (const Row& r : rows)
      if (!r.matches) fmt::print("{}: {}\n", r.layout.describe(), r.mismatch);
    const bool all = std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.matches; });
    return all ? cli::kExitOk : cli::kExitCheckFailed;
  });
}
