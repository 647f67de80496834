// Step 08.5: choosing a layout. Every layout of the world trains the same
// model to the same numbers (08.4); they differ in time and memory, and both
// follow from the earlier chapters' formulas (the chapter text: "The cost
// model").
#include <algorithm>
#include <cmath>
#include <sstream>

#include "dtw/model/params.h"
#include "dtw/train/micro_batches.h"
#include "dtw/train/network.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {
namespace {

std::int64_t element_bytes(const train::RunSpec& spec) {
  return spec.dtype == train::DType::kFloat64 ? 8 : 4;
}

// A ring allreduce of n bytes over `size` ranks on `link`: 2(size − 1) rounds of n/size.
double ring_allreduce(double bytes, int size, const train::Link& link) {
  if (size <= 1) return 0;
  return 2.0 * (size - 1) * link.seconds(bytes / size);
}

// The link a group of `size` members `stride` ranks apart crosses: inside a
// node when the whole span fits in one (nodes hold consecutive ranks).
const train::Link& link_of(const train::Cluster& cluster, int stride, int size) {
  return stride * size <= cluster.ranks_per_node ? cluster.intra : cluster.inter;
}

template <class T>
train::MemoryFigures memory_of(const train::RunSpec& spec, const Layout& layout,
                               const ch05::StageMap& map, Coords at) {
  train::MemoryFigures f{};
  DTW_TODO("08.5: A rank's memory: what its plan holds, and the activations 1F1B keeps on its stage at the worst moment.");
  return f;
}

}  // namespace

train::MemoryFigures rank_memory(const train::RunSpec& spec, const Layout& layout, Coords at) {
  const ch05::StageMap map =
      ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, layout.micro_batches, nullptr);
  return element_bytes(spec) == 8 ? memory_of<double>(spec, layout, map, at)
                                  : memory_of<float>(spec, layout, map, at);
}

namespace {

// predict in the run's element type T (its bytes are the model's own).
template <class T>
void predict_into(Prediction& p, const train::RunSpec& spec, const Layout& layout,
                  const train::Cluster& cluster) {
  DTW_TODO("08.5: Predict one layout's step time and its busiest rank's memory from the chapters' formulas (the layout checked first).");
}

}  // namespace

Prediction predict(const train::RunSpec& spec, const Layout& layout, const train::Cluster& cluster) {
  Prediction p;
  p.layout = layout;
  if (element_bytes(spec) == 8) predict_into<double>(p, spec, layout, cluster);
  else predict_into<float>(p, spec, layout, cluster);
  std::ostringstream note;
  const double share = p.step_s > 0 ? 1.0 / p.step_s : 0;
  note.precision(0);
  note << std::fixed << "bubble " << 100 * p.bubble_s * share << "%, tp " << 100 * p.tp_s * share
       << "%, dp " << 100 * p.dp_s * share << "%";
  if (layout.tp > cluster.ranks_per_node) note << ", tp across nodes";
  p.note = note.str();
  return p;
}

std::vector<Layout> valid_layouts(const train::RunSpec& spec, int ranks,
                                  const std::vector<int>& micro_batches, bool with_zero1) {
  std::vector<Layout> out;
  for (int pp = 1; pp <= ranks; ++pp)
    for (int tp = 1; tp <= ranks / pp; ++tp) {
      if (ranks % (pp * tp) != 0) continue;
      const int dp = ranks / (pp * tp);
      std::vector<int> ms = micro_batches;
      if (ms.empty()) ms = {static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(2 * pp, spec.batch / dp)))};
      for (int m : ms)
        for (int z = 0; z <= (with_zero1 && dp > 1 ? 1 : 0); ++z) {
          const Layout l{.pp = pp, .dp = dp, .tp = tp, .micro_batches = m, .zero1 = z == 1};
          try {
            check_layout(spec, l, ranks, -1);
          } catch (const InvalidArgument&) {
            continue;
          }
          out.push_back(l);
        }
    }
  return out;
}

std::vector<Prediction> plan(const train::RunSpec& spec, int ranks, const train::Cluster& cluster,
                             double memory_cap, const std::vector<int>& micro_batches) {
  std::vector<Prediction> out;
  for (const Layout& l : valid_layouts(spec, ranks, micro_batches, true)) {
    Prediction p = predict(spec, l, cluster);
    if (memory_cap > 0 && p.memory_total > memory_cap) continue;
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.step_s < b.step_s; });
  return out;
}

}  // namespace dtw::ch08
