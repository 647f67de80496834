// dtw train's timeline table, its SVG and the run's JSON (train_timeline.h).
#include "train_timeline.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "dtw/memory.h"
#include "dtw/output_file.h"
#include "style.h"

namespace dtw::cli {
namespace {

// Up to this many ranks the table has a row per rank; beyond, a summary.
constexpr std::size_t kRankRows = 16;
// From this many trace events the replay on the modeled fabric is announced.
constexpr std::size_t kLongReplayEvents = 200000;

std::string percent(double x) { return std::isfinite(x) ? fmt::format("{:.0f}%", 100 * x) : "-"; }

// "least 1.2 ms (rank 5), median 1.5 ms, most 2.0 ms (rank 0)" over one column.
std::string spread(const std::vector<train::RankTimeline>& ranks,
                   double train::RankTimeline::*column) {
  const auto by = [column](const train::RankTimeline& a, const train::RankTimeline& b) {
    return a.*column < b.*column;
  };
  const auto least = std::min_element(ranks.begin(), ranks.end(), by);
  const auto most = std::max_element(ranks.begin(), ranks.end(), by);
  std::vector<double> sorted;
  for (const train::RankTimeline& r : ranks) sorted.push_back(r.*column);
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  return fmt::format("least {} (rank {}), median {}, most {} (rank {})",
                     human_seconds((*least).*column), least->rank,
                     human_seconds(sorted[sorted.size() / 2]), human_seconds((*most).*column),
                     most->rank);
}

// JSON has no NaN (the overlap of a run without communication): null.
nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

nlohmann::json timeline_json(const train::Timeline& t) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const train::RankTimeline& r : t.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"compute", r.compute},
                     {"comm", r.comm},
                     {"hidden", r.hidden},
                     {"idle", r.idle}});
  return {{"span", t.span},
          {"bubble", t.has_stages ? number(t.bubble) : nlohmann::json()},
          {"overlap", number(t.overlap)},
          {"ranks", ranks}};
}

}  // namespace

TimelineFigures timeline_figures(const Report& report, int ranks, const train::Cluster& fabric,
                                 std::int64_t steps) {
  // A ring collective over p ranks is p(p-1) messages: at hundreds of ranks
  // the replay takes seconds, which should not pass as a hang.
  if (report.trace.size() >= kLongReplayEvents) {
    fmt::print("{}\n", paint(Paint::kDim, fmt::format("(replaying {} trace events on {} for the "
                                                      "modeled step ...)",
                                                      report.trace.size(), fabric.name)));
    std::fflush(stdout);
  }
  return {train::analyze_timeline(report.trace, ranks), train::replay_on(report.trace, ranks, fabric),
          fabric.name, std::max<std::int64_t>(steps, 1)};
}

void print_timeline(const TimelineFigures& f) {
  const train::Timeline& t = f.measured;
  const train::Replay& r = f.modeled;
  const bool every_rank = t.ranks.size() <= kRankRows;
  // A rank's span is computing, waiting on a message (communication in
  // flight while it does not compute: a peer not ready yet, or bytes
  // moving) and idle. In a pipeline the waiting is the bubble: a stage
  // waits for its neighbour's activation or gradient.
  std::vector<train::RankTimeline> waiting = t.ranks;
  for (train::RankTimeline& w : waiting) w.comm -= w.hidden;
  fmt::print("\n{}\n",
             paint(Paint::kBold,
                   every_rank ? std::string("timeline (per rank: computing, waiting on a message, idle)")
                              : fmt::format("timeline of {} ranks (computing, waiting on a message, "
                                            "idle; every rank: --json FILE)",
                                            t.ranks.size())));
  if (every_rank) {
    fmt::print("  {:<6} {:>10} {:>10} {:>10} {:>14} {:>12}\n", "rank", "compute", "waiting", "idle",
               "not computing", "comm hidden");
    for (const train::RankTimeline& rt : t.ranks)
      fmt::print("  {:<6} {:>10} {:>10} {:>10} {:>14} {:>12}\n", rt.rank, human_seconds(rt.compute),
                 human_seconds(rt.comm - rt.hidden), human_seconds(rt.idle),
                 t.span > 0 ? percent(1 - rt.compute / t.span) : "-", human_seconds(rt.hidden));
  } else {
    fmt::print("  {:<8} {}\n", "compute", spread(t.ranks, &train::RankTimeline::compute));
    fmt::print("  {:<8} {}\n", "waiting", spread(waiting, &train::RankTimeline::comm));
    fmt::print("  {:<8} {}\n", "idle", spread(t.ranks, &train::RankTimeline::idle));
    fmt::print("  {:<8} {}\n", "hidden", spread(t.ranks, &train::RankTimeline::hidden));
  }
  const std::string unmodeled =
      r.unmodeled > 0
          ? fmt::format(" ({} compute phases without FLOPs or bytes count 0)", r.unmodeled)
          : std::string();
  if (t.has_stages)
    fmt::print("  bubble (rank-time not computing: waiting on a neighbour, or idle): measured {}; "
               "on {}: {} of a {} step (modeled){}\n",
               percent(t.bubble), f.fabric, percent(r.timeline.bubble),
               human_seconds(r.seconds / static_cast<double>(f.steps)), unmodeled);
  else
    fmt::print("  on {}: step {} (modeled){}\n", f.fabric,
               human_seconds(r.seconds / static_cast<double>(f.steps)), unmodeled);
  // Overlap is a share of communication time; where the messages take no
  // time (one rank, or a modeled fabric that moves these bytes in no
  // time) there is nothing to share out, and it prints "-".
  fmt::print("  overlap (communication time during which the rank also computed): measured {}; "
             "on {}: {}\n",
             percent(t.overlap), f.fabric, percent(r.timeline.overlap));
}

void write_timeline(const Report& report, int ranks, std::int64_t steps, const std::string& name,
                    const std::string& path) {
  double first = 1e300, last = -1e300;
  for (const TraceEvent& e : report.trace) {
    if (e.category != "compute" && e.category != "comm") continue;
    first = std::min(first, e.start_us);
    last = std::max(last, e.end_us);
  }
  const double from = steps > 3 ? last - (last - first) * 3.0 / static_cast<double>(steps) : first;
  train::write_timeline_svg(report.trace, ranks,
                            fmt::format("{} on {} rank(s), {}", name, ranks,
                                        steps > 3 ? "the last 3 steps" : "every step"),
                            path, from, last);
  fmt::print("wrote {} (the timeline)\n", path);
}

void write_train_json(const std::string& path, const TrainJson& run, const Report& report,
                      const TimelineFigures& f) {
  nlohmann::json memory = nlohmann::json::array();
  for (const MemorySnapshot& m : report.memory) {
    nlohmann::json peaks = nlohmann::json::object();
    for (std::size_t c = 0; c < kMemoryCategories; ++c)
      peaks[std::string(name_of(static_cast<MemoryCategory>(c)))] = m.peak[c];
    memory.push_back({{"rank", m.rank}, {"peak_total", m.peak_total}, {"peak", peaks}});
  }
  nlohmann::json modeled = timeline_json(f.modeled.timeline);
  modeled["fabric"] = f.fabric;
  modeled["step_seconds"] = f.modeled.seconds / static_cast<double>(f.steps);
  const nlohmann::json out = {{"strategy", run.strategy},
                              {"model", run.model},
                              {"ranks", f.measured.ranks.size()},
                              {"steps", f.steps},
                              {"hyperparameters", run.hyperparameters},
                              {"seconds", run.seconds},
                              {"losses", run.losses},
                              {"timeline", timeline_json(f.measured)},
                              {"modeled", modeled},
                              {"memory", memory}};
  write_file(path, out.dump() + "\n", "dtw train --json");
}

}  // namespace dtw::cli
