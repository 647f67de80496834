// dtw bench data-parallelism --part buckets: DDP's step time and the share
// of its gradient allreduces hidden under backward, against the bucket cap,
// on two modeled fabrics (nvlink-8 with 8 ranks, ib-2x8 with 16), next to
// dp-allreduce (nothing hidden): the U-shaped curve.
//
// Times come from the modeled fabric (dtw/train/fabric.h): every compute
// phase of the recorded trace takes its FLOPs and bytes on the cluster's GPU,
// every message α + nβ of its link, a collective's rounds run as they arrive
// and one communicator's collectives one after another.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "data_parallelism_bench.h"
#include "dtw/train/fabric.h"
#include "dtw/train/timeline.h"

namespace dtw::ch02::bench {
namespace {

using namespace dtw::train;

// A collective: the rank that ran it, its channel and its number there.
using Collective = std::tuple<int, int, int>;

// The collectives whose first message a rank posted inside one of its phases
// named `names` (by the host's clock, where the trace recorded them).
std::set<Collective> collectives_in(const std::vector<TraceEvent>& trace,
                                    const std::vector<std::string>& names) {
  std::vector<std::vector<std::pair<double, double>>> phases;
  for (const TraceEvent& e : trace) {
    if (e.category == "comm" || std::find(names.begin(), names.end(), e.name) == names.end())
      continue;
    if (phases.size() <= static_cast<std::size_t>(e.rank)) phases.resize(e.rank + 1);
    phases[static_cast<std::size_t>(e.rank)].emplace_back(e.start_us, e.end_us);
  }
  std::set<Collective> found;
  for (const TraceEvent& e : trace) {
    if (e.category != "comm" || e.channel < 0 || static_cast<std::size_t>(e.rank) >= phases.size())
      continue;
    for (const auto& [from, to] : phases[static_cast<std::size_t>(e.rank)])
      if (e.start_us >= from && e.start_us <= to) found.insert({e.rank, e.channel, e.tag});
  }
  return found;
}

// The share of the gradient allreduces' time that the replay puts under
// compute. They are the collectives started while backward ran (DDP's
// buckets) or in the phase right after it (what is left of them, and
// dp-allreduce's one allreduce, which carries the loss's 8 bytes too): not
// the start's broadcast, nor DDP's loss allreduce, which runs under the
// optimizer.
double hidden_gradient_share(const std::vector<TraceEvent>& trace, const Replay& replay, int p) {
  const std::set<Collective> grads =
      collectives_in(trace, {"forward-backward", "wait-buckets", "allreduce"});
  std::vector<TraceEvent> kept;
  for (const TraceEvent& e : replay.events)
    if (e.category == "compute" || grads.count({e.rank, e.channel, e.tag}) > 0) kept.push_back(e);
  return analyze_timeline(kept, p).overlap;
}

// Modeled seconds per step once the start is over: from the first rank's
// second forward-backward to the end of the run, over steps − 1.
double steady_step_seconds(const Replay& replay, std::int64_t steps) {
  if (steps < 2) return replay.seconds / static_cast<double>(steps);
  std::vector<int> seen;
  double second = 1e300, last = -1e300;
  for (const TraceEvent& e : replay.events) {
    last = std::max(last, e.end_us);
    if (e.name != "forward-backward") continue;
    if (seen.size() <= static_cast<std::size_t>(e.rank)) seen.resize(e.rank + 1);
    if (++seen[static_cast<std::size_t>(e.rank)] == 2) second = std::min(second, e.start_us);
  }
  return (last - second) * 1e-6 / static_cast<double>(steps - 1);
}

BucketRow bucket_row(const RunSpec& spec, const Cluster& fabric, int p, std::int64_t cap_kib) {
  Knobs knobs;
  knobs.set("check_every", "0");
  if (cap_kib > 0) knobs.set("bucket_kib", std::to_string(cap_kib));
  const RunOutcome out = run(cap_kib > 0 ? "ddp-bucketed" : "dp-allreduce", spec, p, knobs, true);
  const Replay replay = replay_on(out.report.trace, p, fabric);
  BucketRow row{fabric.name, p, cap_kib};
  row.buckets = cap_kib > 0 ? static_cast<std::int64_t>(
                                  make_buckets(model::param_layout(spec.config()), cap_kib * 1024, 4)
                                      .size())
                            : 1;
  row.step_s = steady_step_seconds(replay, spec.steps);
  row.hidden_grads = hidden_gradient_share(out.report.trace, replay, p);
  row.hidden_all = replay.timeline.overlap;
  row.hidden_host = analyze_timeline(out.report.trace, p).overlap;
  return row;
}

}  // namespace

std::vector<BucketRow> bucket_part(const Options& opt, const RunSpec& spec) {
  std::vector<BucketRow> rows;
  for (const auto& [name, p] : {std::pair<const char*, int>{"nvlink-8", 8}, {"ib-2x8", 16}}) {
    const Cluster& fabric = find_gpu_cluster(name);
    fmt::print("\nddp-bucketed on {} ({} ranks): {}, batch {} ({} rows per rank), {} steps, "
               "modeled\n",
               name, p, spec.model, spec.batch, spec.batch / p, spec.steps);
    fmt::print("{:>10} {:>8} {:>10} {:>13} {:>12} {:>13}\n", "cap KiB", "buckets", "step (us)",
               "hidden grads", "hidden all", "hidden (host)");
    std::vector<std::int64_t> caps = {0};
    caps.insert(caps.end(), opt.caps.begin(), opt.caps.end());
    for (const std::int64_t cap : caps) {
      const BucketRow row = bucket_row(spec, fabric, p, cap);
      fmt::print("{:>10} {:>8} {:>10.1f} {:>12.0f}% {:>11.0f}% {:>12.0f}%\n",
                 cap > 0 ? std::to_string(cap) : "dp-allred", row.buckets, row.step_s * 1e6,
                 100 * row.hidden_grads, 100 * row.hidden_all, 100 * row.hidden_host);
      std::fflush(stdout);
      rows.push_back(row);
    }
  }
  return rows;
}

// Two panels, one per fabric: their step times differ tenfold, and on one
// axis nvlink-8's U would be a flat line under ib-2x8's.
void plot_buckets(const std::string& stem, const std::vector<BucketRow>& buckets) {
  std::ostringstream s;
  s << "set terminal svg size 960,420 font 'sans,12' background 'white'\nset output '" << stem
    << "-buckets.svg'\nset multiplot layout 1,2 title 'ddp-bucketed, gpt-small: modeled step "
       "time against the bucket cap'\nset xlabel 'bucket cap (KiB, log scale)'\n"
       "set ylabel 'step time (us)'\nset logscale x\nset key top right\nset grid\n";
  for (const auto& [fabric, ranks] : {std::pair<const char*, int>{"nvlink-8", 8}, {"ib-2x8", 16}}) {
    double base = 0;
    s << "$d << EOD\n";
    for (const BucketRow& b : buckets) {
      if (b.fabric != fabric) continue;
      if (b.cap_kib == 0) base = b.step_s * 1e6;
      else s << b.cap_kib << " " << b.step_s * 1e6 << "\n";
    }
    s << "EOD\nset title '" << fabric << ", " << ranks << " ranks'\nset yrange [0:*]\n"
      << "plot $d w lp lw 2 pt 7 t 'ddp-bucketed', " << base << " w l dt 2 lw 2 t 'dp-allreduce'\n";
  }
  s << "unset multiplot\n";
  if (gnuplot(s.str())) fmt::print("wrote {}-buckets.svg\n", stem);
}

}  // namespace dtw::ch02::bench
