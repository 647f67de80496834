// dtw bench data-parallelism: the two sweeps of chapter 02 that `dtw bench
// train` (one row per strategy) does not make.
//
//   --part server    bytes per step on the server's link against the busiest
//                    ring link, for p = 2, 4, 8 (their ratio is p/2)
//                    (server_link_bench.cpp);
//   --part buckets   DDP's step time and the share of its gradient allreduces
//                    hidden under backward against the bucket cap, from one
//                    bucket per tensor to one bucket, on two modeled fabrics,
//                    next to dp-allreduce: the U-shaped curve
//                    (bucket_sweep_bench.cpp).
//
// Byte counts are exact. Times and overlaps come from the modeled fabric
// (dtw/train/fabric.h). --out STEM writes STEM.json and the plots
// STEM-server.svg and STEM-buckets.svg (gnuplot).

#include <fmt/core.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "data_parallelism_bench.h"
#include "dtw/output_file.h"
#include "exit_codes.h"

namespace dtw::ch02::bench {

train::RunOutcome run(const std::string& strategy, const train::RunSpec& spec, int ranks,
                      train::Knobs knobs, bool trace) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.trace = trace;
  o.compare = false;  // the tests check correctness; this measures
  o.knobs = std::move(knobs);
  o.timeout = std::chrono::minutes(10);
  return train::run_strategy(train::find_strategy(strategy), spec, o);
}

bool gnuplot(const std::string& script) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("dtw-dp-bench-" + std::to_string(::getpid()) + ".gp");
  write_file(path.string(), script, "the gnuplot script");
  // Like every child process (process.h): no shell, and how it ended is said.
  const bool drawn = cli::draw_with_gnuplot({path.string()});
  std::filesystem::remove(path);
  return drawn;
}

namespace {

void write_json(const std::string& stem, const std::vector<LinkRow>& links,
                const std::vector<BucketRow>& buckets) {
  std::ostringstream json;
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
                "\"step_s\": {}, \"hidden_grads\": {}, \"hidden_all\": {}, "
                "\"hidden_host\": {}}}",
                b.fabric, b.ranks, b.cap_kib, b.buckets, b.step_s, b.hidden_grads, b.hidden_all,
                b.hidden_host);
  }
  json << "\n  ]\n}\n";
  write_file(stem + ".json", json.str(), "--out");  // throws when the write fails
  fmt::print("\nwrote {}.json\n", stem);
}

}  // namespace
}  // namespace dtw::ch02::bench

int main(int argc, char** argv) {
  CLI::App app{
      "dtw bench data-parallelism: the server's link against the ring's, and DDP's "
      "step time against the bucket cap on modeled fabrics",
      "dtw bench data-parallelism"};
  using namespace dtw;
  using namespace dtw::ch02::bench;
  Options opt;
  cli::add_name(app, "--part", opt.part, "Which sweep", {"server", "buckets", "all"});
  app.add_option("--model", opt.model, "Model of the bucket sweep")->capture_default_str();
  cli::add_int(app, "--batch", opt.batch, "Global batch of the bucket sweep", {1, 1 << 20});
  cli::add_int(app, "--steps", opt.steps, "Steps per run of the bucket sweep", {1, 100000});
  cli::add_int_list(app, "--caps", opt.caps, "Bucket caps in KiB", {1, 1 << 30});
  cli::add_path(app, "--out", opt.out, "Write STEM.json, STEM-server.svg, STEM-buckets.svg");
  return cli::bench_main(app, argc, argv, [&] {
    train::RunSpec spec = train::standard_run(opt.model);
    spec.batch = opt.batch;
    spec.steps = opt.steps;
    spec.validate();
    // Every run needs at least one row per rank: the server part's timed
    // step has 8 ranks, the bucket sweep 16 (ib-2x8).
    const std::int64_t most_ranks = opt.part == "server" ? 8 : 16;
    DTW_CHECK_ARG(opt.batch >= most_ranks, "--batch " << opt.batch << " is too small for --part "
                                                      << opt.part << ": it runs " << most_ranks
                                                      << " ranks, each needs at least one row");
    // Every output is checked before anything is measured.
    if (!opt.out.empty()) {
      check_writable(opt.out + ".json", "--out");
      if (opt.part != "buckets") check_writable(opt.out + "-server.svg", "--out");
      if (opt.part != "server") check_writable(opt.out + "-buckets.svg", "--out");
    }
    cli::print_rows_code();
    std::vector<LinkRow> links;
    std::vector<BucketRow> buckets;
    if (opt.part != "buckets") {
      links = server_part(spec);
      server_time_part(spec);
    }
    if (opt.part != "server") buckets = bucket_part(opt, spec);
    if (!opt.out.empty()) {
      write_json(opt.out, links, buckets);
      if (!links.empty()) plot_server(opt.out, links);
      if (!buckets.empty()) plot_buckets(opt.out, buckets);
    }
    return cli::kExitOk;
  });
}
