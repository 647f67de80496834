// dtw bench data-parallelism: the two sweeps of chapter 02 that `dtw bench
// train` (one row per strategy) does not make.
//
//   --part server    bytes per step on the server's link against the busiest
//                    ring link, for p = 2, 4, 8 (their ratio is p/2);
//   --part buckets   DDP's step time and the share of its allreduce hidden
//                    under backward against the bucket cap, from one bucket
//                    per tensor to one bucket, on two modeled fabrics
//                    (nvlink-8 with 8 ranks, ib-2x8 with 16), next to
//                    dp-allreduce (nothing hidden); the U-shaped curve.
//
// Byte counts are exact. Times and overlaps come from the modeled fabric
// (dtw/train/fabric.h): every compute phase of the recorded trace takes its
// FLOPs and bytes on the cluster's GPU, every message α + nβ of its link.
// --out STEM writes STEM.json and the plots STEM-server.svg and
// STEM-buckets.svg (gnuplot).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data_parallelism.h"
#include "dtw/train/fabric.h"
#include "dtw/train/timeline.h"

namespace {

using namespace dtw;
using namespace dtw::train;

struct Options {
  std::string part = "all", out;
  std::string model = "gpt-small";
  std::int64_t batch = 128, steps = 2;
  std::vector<std::int64_t> caps = {1, 16, 64, 256, 512, 1024, 2048, 4096, 16384};
};

RunOutcome run(const std::string& strategy, const RunSpec& spec, int ranks, Knobs knobs,
               bool trace) {
  HarnessOptions o;
  o.ranks = ranks;
  o.trace = trace;
  o.compare = false;  // the tests check correctness; this measures
  o.knobs = std::move(knobs);
  o.timeout = std::chrono::minutes(10);
  return run_strategy(find_strategy(strategy), spec, o);
}

// ---- the server's link against the ring's -----------------------------------------

struct LinkRow {
  int p = 0;
  double server_out = 0, server_in = 0, ring = 0;
};

// Bytes per step, without the start (the broadcast): a run of 3 steps minus one of 1.
std::vector<std::vector<double>> per_step(const std::string& strategy, RunSpec spec, int p) {
  spec.steps = 1;
  const Report one = run(strategy, spec, p, {}, false).report;
  spec.steps = 3;
  const Report three = run(strategy, spec, p, {}, false).report;
  std::vector<std::vector<double>> b(p, std::vector<double>(p));
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < p; ++j) b[i][j] = (three.traffic.bytes(i, j) - one.traffic.bytes(i, j)) / 2.0;
  return b;
}

std::vector<LinkRow> server_part(const RunSpec& base) {
  RunSpec spec = base;
  spec.model = "gpt-tiny";  // bytes scale with Ψ only; the tiny model keeps 8 ranks quick
  spec.batch = 8;
  std::vector<LinkRow> rows;
  fmt::print("\nserver link vs ring link, {} (Ψe = {} bytes), bytes per step\n", spec.model,
             model::param_layout(spec.config()).size() * 4);
  fmt::print("{:>3} {:>14} {:>14} {:>16} {:>8} {:>6}\n", "p", "server sends", "server gets",
             "busiest ring link", "ratio", "p/2");
  for (const int p : {2, 4, 8}) {
    LinkRow row{.p = p};
    const auto server = per_step("dp-server", spec, p), ring = per_step("dp-allreduce", spec, p);
    for (int j = 0; j < p; ++j) row.server_out += server[0][j];
    for (int i = 0; i < p; ++i) row.server_in += server[i][0];
    for (const auto& r : ring)
      for (const double b : r) row.ring = std::max(row.ring, b);
    fmt::print("{:>3} {:>14.0f} {:>14.0f} {:>16.0f} {:>8.2f} {:>6.1f}\n", p, row.server_out,
               row.server_in, row.ring, row.server_out / row.ring, p / 2.0);
    rows.push_back(row);
  }
  return rows;
}

// The seeds' "idle GPUs": on a modeled 8-GPU node, how long a step of the
// server strategy takes against the ring's, and what share of it a worker
// and the server spend computing (the rest they wait on messages).
void server_time_part(const RunSpec& spec) {
  const Cluster& fabric = find_gpu_cluster("nvlink-8");
  const int p = 8;
  fmt::print("\nserver vs ring on {} ({} ranks), {}, batch {}, modeled\n", fabric.name, p,
             spec.model, spec.batch);
  fmt::print("{:<14} {:>12} {:>18} {:>18}\n", "strategy", "step (us)", "worker computes",
             "rank 0 computes");
  for (const char* name : {"dp-server", "dp-allreduce"}) {
    const RunOutcome out = run(name, spec, p, Knobs().set("check_every", "0"), true);
    const Replay replay = replay_on(out.report.trace, p, fabric);
    const auto share = [&](int r) {
      return replay.timeline.ranks[static_cast<std::size_t>(r)].compute / replay.timeline.span;
    };
    fmt::print("{:<14} {:>12.1f} {:>17.0f}% {:>17.0f}%\n", name,
               1e6 * replay.seconds / static_cast<double>(spec.steps), 100 * share(p - 1),
               100 * share(0));
  }
}

// ---- bucket size on the modeled fabrics ---------------------------------------------

struct BucketRow {
  std::string fabric;
  int ranks = 0;
  std::int64_t cap_kib = 0;  // 0: dp-allreduce, one allreduce after backward
  std::int64_t buckets = 0;
  double step_s = 0, overlap_modeled = 0, overlap_measured = 0;
};

BucketRow bucket_row(const RunSpec& spec, const Cluster& fabric, int p, std::int64_t cap_kib) {
  Knobs knobs;
  knobs.set("check_every", "0");
  if (cap_kib > 0) knobs.set("bucket_kib", std::to_string(cap_kib));
  const RunOutcome out = run(cap_kib > 0 ? "ddp-bucketed" : "dp-allreduce", spec, p, knobs, true);
  const Replay replay = replay_on(out.report.trace, p, fabric);
  BucketRow row{fabric.name, p, cap_kib};
  row.buckets =
      cap_kib > 0
          ? static_cast<std::int64_t>(
                dtw::ch02::make_buckets(model::param_layout(spec.config()), cap_kib * 1024, 4)
                    .size())
          : 1;
  row.step_s = replay.seconds / static_cast<double>(spec.steps);
  row.overlap_modeled = replay.timeline.overlap;
  row.overlap_measured = analyze_timeline(out.report.trace, p).overlap;
  return row;
}

std::vector<BucketRow> bucket_part(const Options& opt, RunSpec spec) {
  std::vector<BucketRow> rows;
  for (const auto& [name, p] : {std::pair<const char*, int>{"nvlink-8", 8}, {"ib-2x8", 16}}) {
    const Cluster& fabric = find_gpu_cluster(name);
    fmt::print("\nddp-bucketed on {} ({} ranks): {}, batch {} ({} rows per rank), modeled\n", name,
               p, spec.model, spec.batch, spec.batch / p);
    fmt::print("{:>10} {:>8} {:>12} {:>14} {:>14}\n", "cap KiB", "buckets", "step (us)",
               "hidden (model)", "hidden (host)");
    std::vector<std::int64_t> caps = {0};
    caps.insert(caps.end(), opt.caps.begin(), opt.caps.end());
    for (const std::int64_t cap : caps) {
      const BucketRow row = bucket_row(spec, fabric, p, cap);
      fmt::print("{:>10} {:>8} {:>12.1f} {:>13.0f}% {:>13.0f}%\n",
                 cap > 0 ? std::to_string(cap) : "dp-allred", row.buckets, row.step_s * 1e6,
                 100 * row.overlap_modeled, 100 * row.overlap_measured);
      rows.push_back(row);
    }
  }
  return rows;
}

// ---- output ------------------------------------------------------------------------

bool gnuplot(const std::string& script) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("dtw-dp-bench-" + std::to_string(::getpid()) + ".gp");
  std::ofstream(path) << script;
  const bool ok = std::system(("gnuplot '" + path.string() + "'").c_str()) == 0;
  if (!ok) fmt::print("no plot: gnuplot failed or is missing (apt-get install gnuplot-nox)\n");
  std::filesystem::remove(path);
  return ok;
}

void write_outputs(const std::string& stem, const std::vector<LinkRow>& links,
                   const std::vector<BucketRow>& buckets) {
  std::ofstream json(stem + ".json");
  json << "{\n  \"server\": [";
  for (std::size_t i = 0; i < links.size(); ++i)
    json << (i ? ",\n    " : "\n    ")
         << fmt::format(
                "{{\"p\": {}, \"server_out\": {}, \"server_in\": {}, \"ring_busiest\": {}}}",
                links[i].p, links[i].server_out, links[i].server_in, links[i].ring);
  json << "\n  ],\n  \"buckets\": [";
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const BucketRow& b = buckets[i];
    json << (i ? ",\n    " : "\n    ")
         << fmt::format(
                "{{\"fabric\": \"{}\", \"ranks\": {}, \"cap_kib\": {}, \"buckets\": {}, "
                "\"step_s\": {}, \"overlap_modeled\": {}, \"overlap_measured\": {}}}",
                b.fabric, b.ranks, b.cap_kib, b.buckets, b.step_s, b.overlap_modeled,
                b.overlap_measured);
  }
  json << "\n  ]\n}\n";
  fmt::print("\nwrote {}.json\n", stem);
  if (!links.empty()) {
    std::ostringstream s;
    s << "set terminal svg size 640,400 font 'sans,12' background 'white'\nset output '" << stem
      << "-server.svg'\nset title \"gpt-tiny, float32: bytes per step on the server's link and on "
         "the busiest ring link\"\n"
         "set xlabel 'ranks p'\nset ylabel 'MB per step'\nset y2label 'ratio'\nset y2tics\n"
         "set ytics nomirror\nset key top left\nset xtics (2, 4, 8)\nset grid\n"
         "$d << EOD\n";
    for (const LinkRow& l : links)
      s << l.p << " " << l.server_out / 1e6 << " " << l.ring / 1e6 << " " << l.server_out / l.ring
        << "\n";
    s << "EOD\nplot $d u 1:2 w lp lw 2 pt 7 t 'server link (sends)', $d u 1:3 w lp lw 2 pt 5 t "
         "'busiest ring link', $d u 1:4 axes x1y2 w lp dt 2 pt 9 t 'ratio (right)', "
         "x/2 axes x1y2 w l dt 3 lc rgb 'gray' t 'p/2 (right)'\n";
    if (gnuplot(s.str())) fmt::print("wrote {}-server.svg\n", stem);
  }
  if (!buckets.empty()) {
    std::ostringstream s;
    s << "set terminal svg size 720,420 font 'sans,12' background 'white'\nset output '" << stem
      << "-buckets.svg'\nset title 'ddp-bucketed: modeled step time against the bucket cap'\n"
         "set xlabel 'bucket cap (KiB, log scale)'\nset ylabel 'step time (us)'\nset logscale x\n"
         "set key top right\nset grid\n";
    for (const char* f : {"nvlink-8", "ib-2x8"}) {
      s << "$" << (f[0] == 'n' ? "nv" : "ib") << " << EOD\n";
      for (const BucketRow& b : buckets)
        if (b.fabric == f && b.cap_kib > 0) s << b.cap_kib << " " << b.step_s * 1e6 << "\n";
      s << "EOD\n";
    }
    double base_nv = 0, base_ib = 0;
    for (const BucketRow& b : buckets)
      if (b.cap_kib == 0) (b.fabric == "nvlink-8" ? base_nv : base_ib) = b.step_s * 1e6;
    s << "plot $nv w lp lw 2 pt 7 t 'nvlink-8, 8 ranks', " << base_nv
      << " w l dt 2 lc 1 t 'nvlink-8, dp-allreduce', $ib w lp lw 2 pt 5 lc 2 t 'ib-2x8, 16 ranks', "
      << base_ib << " w l dt 2 lc 2 t 'ib-2x8, dp-allreduce'\n";
    if (gnuplot(s.str())) fmt::print("wrote {}-buckets.svg\n", stem);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dtw bench data-parallelism: the server's link against the ring's, and DDP's "
      "step time against the bucket cap on modeled fabrics",
      "dtw bench data-parallelism"};
  Options opt;
  app.add_option("--part", opt.part, "server, buckets or all")->capture_default_str();
  app.add_option("--model", opt.model, "Model of the bucket sweep")->capture_default_str();
  app.add_option("--batch", opt.batch, "Global batch of the bucket sweep")->capture_default_str();
  app.add_option("--steps", opt.steps, "Steps per run of the bucket sweep")->capture_default_str();
  app.add_option("--caps", opt.caps, "Bucket caps in KiB")->delimiter(',')->capture_default_str();
  app.add_option("--out", opt.out, "Write STEM.json, STEM-server.svg, STEM-buckets.svg");
  CLI11_PARSE(app, argc, argv);
  try {
    DTW_CHECK_ARG(opt.part == "all" || opt.part == "server" || opt.part == "buckets",
                  "--part " << opt.part << ": server, buckets or all");
    RunSpec spec = standard_run(opt.model);
    spec.batch = opt.batch;
    spec.steps = opt.steps;
    spec.validate();
    std::vector<LinkRow> links;
    std::vector<BucketRow> buckets;
    if (opt.part != "buckets") {
      links = server_part(spec);
      server_time_part(spec);
    }
    if (opt.part != "server") buckets = bucket_part(opt, spec);
    if (!opt.out.empty()) write_outputs(opt.out, links, buckets);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dtw bench data-parallelism: {}\n", e.what());
    return 2;
  }
  return 0;
}
