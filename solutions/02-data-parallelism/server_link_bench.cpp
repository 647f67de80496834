// dtw bench data-parallelism --part server: bytes per step on the server's
// link against the busiest ring link, for p = 2, 4, 8 (their ratio is p/2),
// and a server step against a ring step on a modeled 8-GPU node.
#include <fmt/core.h>

#include <algorithm>
#include <sstream>

#include "data_parallelism_bench.h"
#include "dtw/train/fabric.h"
#include "dtw/train/timeline.h"

namespace dtw::ch02::bench {
namespace {

using namespace dtw::train;

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

}  // namespace

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
    // dp-server keeps no replicas to compare: check_every is dp-allreduce's knob only.
    const Knobs knobs = name == std::string("dp-server") ? Knobs() : Knobs().set("check_every", "0");
    const RunOutcome out = run(name, spec, p, knobs, true);
    const Replay replay = replay_on(out.report.trace, p, fabric);
    const auto share = [&](int r) {
      return replay.timeline.ranks[static_cast<std::size_t>(r)].compute / replay.timeline.span;
    };
    fmt::print("{:<14} {:>12.1f} {:>17.0f}% {:>17.0f}%\n", name,
               1e6 * replay.seconds / static_cast<double>(spec.steps), 100 * share(p - 1),
               100 * share(0));
  }
}

void plot_server(const std::string& stem, const std::vector<LinkRow>& links) {
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

}  // namespace dtw::ch02::bench
