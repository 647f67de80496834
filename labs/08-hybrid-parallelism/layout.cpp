// The layout of a hybrid run and step 08.1: the grid, its groups, and the
// checks every rank makes before the grid's first message.
//
// World rank = (stage · dp + replica) · tp + slice. The tp ranks of a stage
// are consecutive, so on a cluster of 8-GPU nodes a tp group of up to 8 stays
// inside one node, on NVLink: tensor parallelism sends 4 allreduces of the
// whole activation per block and step, the most bytes of any axis. dp comes
// next (one gradient allreduce per step, overlappable), pp outermost (one
// activation per micro-batch and boundary: the fewest bytes, happy on
// InfiniBand).
#include <string>

#include "dtw/errors.h"
#include "dtw/model/units.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

std::string Layout::describe() const {
  std::string s = "pp " + std::to_string(pp) + " × dp " + std::to_string(dp) + " × tp " +
                  std::to_string(tp) + ", m " + std::to_string(micro_batches);
  return zero1 ? s + ", ZeRO-1" : s;
}

Layout layout_from_knobs(const train::Knobs& knobs, const train::RunSpec& spec, int ranks) {
  Layout l;
  auto axis = [&](const char* name, std::int64_t fallback) {
    const std::int64_t v = knobs.get_int(name, fallback);
    DTW_CHECK_ARG(v >= 1 && v <= 4096, "hybrid: " << name << "=" << v << " must be in [1, 4096]");
    return static_cast<int>(v);
  };
  l.pp = axis("pp", 1);
  l.tp = axis("tp", 1);
  // dp takes what pp and tp leave, when they divide the world.
  const int rest = ranks % (l.pp * l.tp) == 0 ? ranks / (l.pp * l.tp) : 1;
  l.dp = axis("dp", rest);
  const std::int64_t rows = spec.batch / l.dp;
  l.micro_batches = static_cast<int>(knobs.get_int("micro_batches", std::max<std::int64_t>(1, std::min<std::int64_t>(2 * l.pp, rows))));
  DTW_CHECK_ARG(l.micro_batches >= 1 && l.micro_batches < 100000,
                "hybrid: micro_batches=" << l.micro_batches << " must be in [1, 100000)");
  const std::string zero = knobs.get("zero1", "0");
  DTW_CHECK_ARG(zero == "0" || zero == "1", "hybrid: zero1=" << zero << " must be 0 or 1");
  l.zero1 = zero == "1";
  return l;
}

std::vector<train::Knob> hybrid_knobs() {
  return {{.name = "pp", .default_value = "1", .help = "pipeline stages"},
          {.name = "dp",
           .default_value = "p/(pp·tp)",
           .help = "data-parallel replicas of the pipeline",
           .default_for = [](const train::RunSpec& spec, int ranks, const train::Knobs& k) {
             return std::to_string(layout_from_knobs(k, spec, ranks).dp);
           }},
          {.name = "tp", .default_value = "1", .help = "tensor-parallel ranks per stage (divides the heads)"},
          {.name = "micro_batches",
           .default_value = "min(2·pp, batch/dp)",
           .help = "micro-batches per replica and step, 1F1B",
           .default_for = [](const train::RunSpec& spec, int ranks, const train::Knobs& k) {
             return std::to_string(layout_from_knobs(k, spec, ranks).micro_batches);
           }},
          {.name = "zero1", .default_value = "0", .help = "1: ZeRO-1 on the dp group (optimizer state sharded)"}};
}

void check_layout(const train::RunSpec& spec, const Layout& layout, int ranks, int rank) {
  const std::string who = rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string();
  DTW_TODO("08.1: Refuse a layout that cannot run, on every rank, before any message: name the rank and the values.");
}

train::Grid make_grid(Comm& world, const Layout& layout) {
  DTW_TODO("08.1: The grid: three named axes, outermost first, so that tp's ranks are neighbours.");
}

Groups groups_of(const train::Grid& grid) {
  Groups g;
  DTW_TODO("08.1: This rank's groups: one per axis, and the world in the grid's order.");
  return g;
}

}  // namespace dtw::ch08
