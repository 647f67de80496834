// @solution-only: the pieces of `dtw bench data-parallelism` (not a lab step; tools/gen-labs skips this file)
//
// The bench is three files: data_parallelism_bench.cpp (the command line and
// the JSON), server_link_bench.cpp (the server's link against the ring's) and
// bucket_sweep_bench.cpp (DDP's step time and hidden share against the
// bucket cap). This header is what they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data_parallelism.h"

namespace dtw::ch02::bench {

/// The bench's options (its command line).
struct Options {
  std::string part = "all", out;
  std::string model = "gpt-small";
  std::int64_t batch = 128, steps = 3;
  std::vector<std::int64_t> caps = {1, 16, 64, 256, 1024, 2048, 2560, 3085, 4096, 16384};
};

/// One run of `strategy` on `ranks` rank threads, traced when `trace`.
train::RunOutcome run(const std::string& strategy, const train::RunSpec& spec, int ranks,
                      train::Knobs knobs, bool trace);

/// Bytes per step on the server's link and on the busiest ring link, at p.
struct LinkRow {
  int p = 0;
  double server_out = 0, server_in = 0, ring = 0;
};
std::vector<LinkRow> server_part(const train::RunSpec& base);
/// The seeds' "idle GPUs": a dp-server step against a dp-allreduce step, modeled.
void server_time_part(const train::RunSpec& spec);
/// The server part's plot (gnuplot): STEM-server.svg.
void plot_server(const std::string& stem, const std::vector<LinkRow>& links);

/// One bucket cap on one modeled fabric.
struct BucketRow {
  std::string fabric;
  int ranks = 0;
  std::int64_t cap_kib = 0;  // 0: dp-allreduce, one allreduce after backward
  std::int64_t buckets = 0;
  double step_s = 0;         // modeled, the mean over the steps
  double hidden_grads = 0;   // share of the gradient allreduces hidden, modeled
  double hidden_all = 0;     // share of all communication hidden, modeled
  double hidden_host = 0;    // share of all communication hidden, this machine's trace
};
std::vector<BucketRow> bucket_part(const Options& opt, const train::RunSpec& spec);
/// The bucket sweep's plot: STEM-buckets.svg.
void plot_buckets(const std::string& stem, const std::vector<BucketRow>& buckets);

/// Runs gnuplot on `script`; false (and "no plot: ..." saying why) when it
/// fails or is missing.
bool gnuplot(const std::string& script);

}  // namespace dtw::ch02::bench
