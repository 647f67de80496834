// dtw bench parameter-server, part 2: the server's link against W, and the
// plot of part 3's loss curves (parameter_server_bench.cpp runs the parts).
//
// A central server is the bottleneck of parameter-server training because
// every worker's push and pull crosses the server's own link: per step it
// carries W shards in and W out, 2·W·Ψ/S values on the busiest of S servers,
// growing with W. In chapter 01's ring allreduce each rank sends and receives
// 2Ψ(p−1)/p values, hardly more for any p. The table measures both from the
// traffic matrix (bytes that were sent, not a formula) and prints the formula
// beside them.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "collectives.h"
#include "dtw/launch.h"
#include "dtw/output_file.h"
#include "dtw/memory.h"
#include "dtw/model/params.h"
#include "dtw/train/strategy.h"
#include "parameter_server_bench.h"

namespace dtw::ch03::bench {
namespace {

// The most bytes that cross one server's link in a run: servers are ranks
// 0 .. S−1, workers S .. S+W−1; a link counts both directions.
std::int64_t busiest_server_link(const Report& report, int S, int W) {
  std::int64_t busiest = 0;
  for (int s = 0; s < S; ++s) {
    std::int64_t link = 0;
    for (int w = S; w < S + W; ++w) link += report.traffic.bytes(s, w) + report.traffic.bytes(w, s);
    busiest = std::max(busiest, link);
  }
  return busiest;
}

// The busiest link of chapter 01's ring allreduce of `n` floats on p ranks
// (what a rank sends plus what it receives), measured from the traffic matrix.
std::int64_t ring_link(std::int64_t n, int p) {
  const Report report = launch(p, [&](Comm& comm) {
    std::vector<float> data(static_cast<std::size_t>(n), 1.0f);
    ch01::allreduce(comm, std::span<float>(data), ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  });
  std::int64_t busiest = 0;
  for (int r = 0; r < p; ++r) {
    const std::int64_t link = report.traffic.bytes_sent(r) + report.traffic.bytes_received(r);
    busiest = std::max(busiest, link);
  }
  return busiest;
}

}  // namespace

void server_link_table(const train::RunSpec& spec, nlohmann::json& out) {
  const std::int64_t psi = model::param_layout(spec.config()).size();
  train::RunSpec one = spec;
  one.steps = 1;
  one.batch = 8;
  fmt::print("\n{:>3} {:>3} {:>14} {:>14} {:>16} {:>8}\n", "W", "S", "server link/step",
             "(formula)", "ring link (W ranks)", "ratio");
  for (int W : {1, 2, 4, 8}) {
    for (int S : {1, 2}) {
      train::HarnessOptions o;
      o.ranks = S + W;
      o.compare = false;
      o.knobs = train::Knobs::parse({"servers=" + std::to_string(S)});
      const train::RunOutcome r = train::run_strategy(train::find_strategy("ps-sync"), one, o);
      const std::int64_t link = busiest_server_link(r.report, S, W);
      // W shards out and in, W versions (8 bytes) out and W headers (24 bytes) in.
      const std::int64_t formula = 2 * W * ((psi + S - 1) / S) * 4 + 32 * W;
      const std::int64_t ring = W > 1 ? ring_link(psi, W) : 0;
      fmt::print("{:>3} {:>3} {:>14} {:>14} {:>16} {:>8}\n", W, S, format_bytes(link),
                 format_bytes(formula), W > 1 ? format_bytes(ring) : std::string("-"),
                 W > 1 ? fmt::format("{:.2f}", static_cast<double>(link) / ring) : std::string("-"));
      out["server_link"].push_back({{"workers", W}, {"servers", S}, {"bytes_per_step", link},
                                    {"formula", formula}, {"ring_link", ring}});
    }
  }
}

void plot(const std::string& csv, const std::string& svg, const std::string& title) {
  std::ostringstream gp;
  gp << "set terminal svg size 960,420 dynamic font 'sans,11' background '#ffffff'\n"
     << "set output '" << svg << "'\nset datafile separator ','\nset key top right\n"
     << "set grid\nset multiplot layout 1,2 title '" << title << "'\n"
     << "set xlabel 'step (B rows each)'\nset ylabel 'loss'\n"
     << "plot for [s in 'ps-sync ps-ssp ps-async'] '" << csv
     << "' using (strcol(1) eq s ? $2 : 1/0):4 with lines lw 2 title s\n"
     << "set xlabel 'wall seconds'\nset ylabel 'loss'\n"
     << "plot for [s in 'ps-sync ps-ssp ps-async'] '" << csv
     << "' using (strcol(1) eq s ? $3 : 1/0):4 with lines lw 2 title s\nunset multiplot\n";
  const std::string script = svg + ".gp";
  write_file(script, gp.str(), "--plot");
  // Like every child process (process.h): no shell, and how it ended is said
  // ("no plot: gnuplot ended with ..."); the CSV is there either way.
  const bool drawn = cli::draw_with_gnuplot({script});
  std::remove(script.c_str());
  if (drawn) fmt::print("wrote {}\n", svg);
}

}  // namespace dtw::ch03::bench
