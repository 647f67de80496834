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
  // @lab 08.1: Refuse a layout that cannot run, on every rank, before any message: name the rank and the values.
  // @hint 1: Four things can be wrong: the axes do not multiply to the world; tensor parallelism
  // @hint 1: on a model it cannot cut (not a GPT, or heads / hidden units that t does not divide);
  // @hint 1: more stages than the model has units; fewer rows in the batch than replicas × m.
  // @hint 2: Each check is one DTW_CHECK_ARG whose message starts with `who` and carries the
  // @hint 2: numbers the contract spells out. For the heads, call chapter 06's megatron_shard for
  // @hint 2: any one slice (slice 0: every slice divides alike): it already refuses what does not
  // @hint 2: divide, naming both; put `who` in front of its message.
  // @hint 3: layout.ranks(); spec.config() (.kind == model::ModelKind::kGpt); ch06::megatron_shard(c,
  // @hint 3: 0, layout.tp) inside a try that rethrows with `who` in front;
  // @hint 3: model::model_units(c, model::param_layout(c)).size(); spec.batch vs layout.dp *
  // @hint 3: layout.micro_batches.
  DTW_CHECK_ARG(layout.ranks() == ranks, who << "pp " << layout.pp << " × dp " << layout.dp << " × tp "
                                             << layout.tp << " is " << layout.ranks()
                                             << " ranks, not " << ranks);
  const model::ModelConfig c = spec.config();
  if (layout.tp > 1) {
    DTW_CHECK_ARG(c.kind == model::ModelKind::kGpt,
                  who << "tp " << layout.tp << " needs a GPT to cut; " << spec.model << " is not one");
    try {
      ch06::megatron_shard(c, 0, layout.tp);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(who + e.what());
    }
  }
  const std::size_t units = model::model_units(c, model::param_layout(c)).size();
  DTW_CHECK_ARG(static_cast<std::size_t>(layout.pp) <= units,
                who << "pp " << layout.pp << " stages, but " << spec.model << " has only " << units
                    << " units to cut");
  DTW_CHECK_ARG(spec.batch >= static_cast<std::int64_t>(layout.dp) * layout.micro_batches,
                who << "a batch of " << spec.batch << " rows cannot feed dp " << layout.dp << " × m "
                    << layout.micro_batches << " micro-batches");
  // @end
}

train::Grid make_grid(Comm& world, const Layout& layout) {
  // @lab 08.1: The grid: three named axes, outermost first, so that tp's ranks are neighbours.
  // @hint 1: The order of the axes decides which ranks share a group: the innermost axis varies
  // @hint 1: fastest, so its groups are consecutive ranks (one node). Which axis must that be?
  // @hint 2: pp outermost, then dp, then tp: world rank = (stage · dp + replica) · tp + slice.
  // @hint 3: train::Grid(world, {{"pp", layout.pp}, {"dp", layout.dp}, {"tp", layout.tp}}).
  return train::Grid(world, {{"pp", layout.pp}, {"dp", layout.dp}, {"tp", layout.tp}});
  // @end
}

Groups groups_of(const train::Grid& grid) {
  Groups g;
  // @lab 08.1: This rank's groups: one per axis, and the world in the grid's order.
  // @hint 1: A group along an axis is the ranks that differ only in that axis's coordinate: the
  // @hint 1: pipeline of this rank's replica and slice differs only in the stage.
  // @hint 2: Naming the wrong axis gives a group of the right size with the wrong ranks in it;
  // @hint 2: the world group is every axis at once.
  // @hint 3: &grid.group("pp"), &grid.group("dp"), &grid.group("tp"), &grid.group({"pp", "dp", "tp"}).
  g.pp = &grid.group("pp");
  g.dp = &grid.group("dp");
  g.tp = &grid.group("tp");
  g.world = &grid.group({"pp", "dp", "tp"});
  // @end
  return g;
}

}  // namespace dtw::ch08
