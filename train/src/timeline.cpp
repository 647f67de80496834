// Timeline figures from trace events: unions and intersections of intervals.
#include "dtw/train/timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "dtw/errors.h"

namespace dtw::train {
namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorted, disjoint union of `v`.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.emplace_back(a, b);
  }
  return out;
}

double length(const Intervals& v) {
  double s = 0;
  for (const auto& [a, b] : v) s += b - a;
  return s;
}

// |x ∩ y| of two sorted, disjoint lists.
double overlap_length(const Intervals& x, const Intervals& y) {
  double s = 0;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const double lo = std::max(x[i].first, y[j].first), hi = std::min(x[i].second, y[j].second);
    if (hi > lo) s += hi - lo;
    if (x[i].second < y[j].second) ++i;
    else ++j;
  }
  return s;
}

}  // namespace

Timeline analyze_timeline(const std::vector<TraceEvent>& events, int world) {
  DTW_CHECK_ARG(world >= 1, "analyze_timeline: world " << world << " must be at least 1");
  std::vector<Intervals> compute(static_cast<std::size_t>(world)), comm(compute.size());
  double first = std::numeric_limits<double>::infinity(), last = -first;
  Timeline t;
  for (const TraceEvent& e : events) {
    const bool is_compute = e.category == "compute", is_comm = e.category == "comm";
    if (!is_compute && !is_comm) continue;
    DTW_CHECK_ARG(e.rank >= 0 && e.rank < world, "analyze_timeline: an event of rank "
                                                     << e.rank << " in a world of " << world);
    (is_compute ? compute : comm)[static_cast<std::size_t>(e.rank)].emplace_back(e.start_us * 1e-6,
                                                                                  e.end_us * 1e-6);
    first = std::min(first, e.start_us * 1e-6);
    last = std::max(last, e.end_us * 1e-6);
    if (is_compute && e.stage >= 0) t.has_stages = true;
  }
  t.span = last > first ? last - first : 0;
  double total_compute = 0, total_comm = 0, total_hidden = 0;
  for (int r = 0; r < world; ++r) {
    const Intervals c = merged(compute[r]), m = merged(comm[r]);
    Intervals both = c;
    both.insert(both.end(), m.begin(), m.end());
    RankTimeline rt;
    rt.rank = r;
    rt.compute = length(c);
    rt.comm = length(m);
    rt.hidden = overlap_length(c, m);
    rt.idle = std::max(0.0, t.span - length(merged(both)));
    total_compute += rt.compute;
    total_comm += rt.comm;
    total_hidden += rt.hidden;
    t.ranks.push_back(rt);
  }
  t.bubble = t.span > 0 ? 1 - total_compute / (world * t.span) : 0;
  t.overlap = total_comm > 0 ? total_hidden / total_comm : std::nan("");
  return t;
}

}  // namespace dtw::train
