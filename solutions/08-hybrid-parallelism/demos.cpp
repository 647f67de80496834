// Chapter 08's strategy for `dtw train --strategy hybrid` and `dtw bench
// train`, its demos for `dtw run` and `dtw tour`, and its pitfalls for `dtw
// run pitfall`. Solution only: tools/gen-labs does not copy demos.cpp.
#include <algorithm>
#include <cmath>  // NAN
#include <cstdio>
#include <string>

#include "dtw/demo.h"
#include "dtw/train/reference.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {
namespace {

// The busiest rank's memory by the planner's formulas.
train::MemoryFigures peak(const train::FormulaInput& in) {
  const Layout l = layout_from_knobs(in.knobs, in.spec, in.ranks);
  train::MemoryFigures most = train::no_memory_figures();
  double best = -1;
  for (int s = 0; s < l.pp; ++s)
    for (int d = 0; d < l.dp; ++d)
      for (int k = 0; k < l.tp; ++k) {
        train::MemoryFigures f = rank_memory(in.spec, l, {s, d, k});
        double sum = 0;
        for (double x : f) sum += x;
        if (sum > best) {
          best = sum;
          most = f;
          most[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = NAN;
          most[static_cast<std::size_t>(MemoryCategory::kOther)] = NAN;
        }
      }
  return most;
}

DTW_REGISTER_STRATEGY(
    {.name = "hybrid",
     .chapter = "08",
     .description = "pp × dp × tp in one run: 1F1B stages, each Megatron-parallel, replicated over dp",
     .knobs = hybrid_knobs(),
     .min_ranks = 1,
     .run = [](auto& run) { hybrid(run); },
     .bytes_formula = nullptr,
     .peak_formula = [](const train::FormulaInput& in) { return peak(in); },
     .bubble_formula =
         [](const train::FormulaInput& in) {
           const Layout l = layout_from_knobs(in.knobs, in.spec, in.ranks);
           return static_cast<double>(l.pp - 1) / (l.micro_batches + l.pp - 1);
         },
     .check = [](const train::RunSpec& spec, int ranks, const train::Knobs& knobs) {
       check_layout(spec, layout_from_knobs(knobs, spec, ranks), ranks, -1);
     }});

}  // namespace
}  // namespace dtw::ch08
