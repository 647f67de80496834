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

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data_parallelism_bench.h"

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
  std::ofstream(path) << script;
  const bool ok = std::system(("gnuplot '" + path.string() + "'").c_str()) == 0;
  if (!ok) fmt::print("no plot: gnuplot failed or is missing (apt-get install gnuplot-nox)\n");
  std::filesystem::remove(path);
  return ok;
}

namespace {

void write_json(const std::string& stem, const std::vector<LinkRow>& links,
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
                "\"step_s\": {}, \"hidden_grads\": {}, \"hidden_all\": {}, "
                "\"hidden_host\": {}}}",
                b.fabric, b.ranks, b.cap_kib, b.buckets, b.step_s, b.hidden_grads, b.hidden_all,
                b.hidden_host);
  }
  json << "\n  ]\n}\n";
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
    train::RunSpec spec = train::standard_run(opt.model);
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
    if (!opt.out.empty()) {
      write_json(opt.out, links, buckets);
      if (!links.empty()) plot_server(opt.out, links);
      if (!buckets.empty()) plot_buckets(opt.out, buckets);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "dtw bench data-parallelism: {}\n", e.what());
    return 2;
  }
  return 0;
}
