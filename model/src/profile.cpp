// Per-layer-kind time accounting.
#include "dtw/model/profile.h"

#include <algorithm>

namespace dtw::model {

void LayerTimes::add(std::string_view kind, double seconds, double flops) {
  flops_added_ += flops;
  for (Entry& e : entries_) {
    if (e.kind == kind) {
      e.seconds += seconds;
      e.flops += flops;
      ++e.calls;
      return;
    }
  }
  entries_.push_back(Entry{std::string(kind), seconds, flops, 1});
}

std::vector<LayerTimes::Entry> LayerTimes::entries() const {
  std::vector<Entry> sorted = entries_;
  // stable: kinds with equal time keep the order in which they were first seen.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Entry& a, const Entry& b) { return a.seconds > b.seconds; });
  return sorted;
}

double LayerTimes::total_seconds() const {
  double total = 0;
  for (const Entry& e : entries_) total += e.seconds;
  return total;
}

double LayerTimes::seconds(std::string_view kind) const {
  for (const Entry& e : entries_) {
    if (e.kind == kind) return e.seconds;
  }
  return 0;
}

}  // namespace dtw::model
