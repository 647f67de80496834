// Chapter 08's strategy for `dtw train --strategy hybrid` and `dtw bench
// train`, its demos for `dtw run` and `dtw tour`, and its pitfalls for `dtw
// run pitfall`. Solution only: tools/gen-labs does not copy demos.cpp, so
// the pitfalls' broken variants (near-complete solutions of 08.1 and 08.4)
// stay out of labs/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/demo.h"
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/model/units.h"
#include "dtw/reference.h"
#include "dtw/train/reference.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {
namespace {

// The busiest rank's memory by the planner's formulas (predict's memory
// does not depend on the cluster); comm buffers and the rest have none.
train::MemoryFigures peak(const train::FormulaInput& in) {
  const Layout l = layout_from_knobs(in.knobs, in.spec, in.ranks);
  train::MemoryFigures most = predict(in.spec, l, train::find_gpu_cluster("nvlink-8")).memory;
  most[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = NAN;
  most[static_cast<std::size_t>(MemoryCategory::kOther)] = NAN;
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

// ---- the demo: gpt-tiny on pp 2 × dp 2 × tp 2, checked against the reference --------

train::RunSpec demo_run(std::int64_t steps) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = 8;
  spec.warmup_steps = 1;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

// Every piece this rank reported against train_reference; raises with the
// first mismatch (naming the tensor element) followed by `why`.
DemoCheck compare(Comm& comm, const train::RunSpec& spec, train::RankRun<double>& run,
                  const std::string& why) {
  double most = 0;
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        comm.rank(), spec, run.losses(), values, begin, train::kDoubleTolerance, spec.steps);
    if (!c.ok && why.empty()) return {false, c.message, 0};
    DTW_CHECK_ARG(c.ok, c.message << why);
    most = std::max(most, c.max_abs_diff);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, "gpt-tiny, %lld steps: equal to the reference (max |dθ| %.1e)",
                static_cast<long long>(spec.steps), most);
  return {true, detail, 0};
}

DemoCheck hybrid_demo(Comm& comm) {
  const train::RunSpec spec = demo_run(3);
  train::RankRun<double> run(comm, spec, {});
  train_hybrid(run, Layout{.pp = 2, .dp = 2, .tp = 2, .micro_batches = 2});
  return compare(comm, spec, run, "");
}

// ---- pitfalls from the field, each caught by a check that names the fault ------------

std::string list(const std::vector<int>& v) {
  std::ostringstream s;
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? " " : "") << v[i];
  return s.str();
}

// The world ranks of `group`'s members, in group order, by exchange (not by
// recomputing the formula the grid was built with).
std::vector<int> members(Comm& group, int world_rank) {
  std::vector<int> mine{world_rank}, all(static_cast<std::size_t>(group.size()));
  reference::allgather(group, std::span<const int>(mine), std::span<int>(all));
  return all;
}

// The grid built pp × tp × dp, dp innermost (pytorch/torchtitan#286,
// huggingface/picotron#17): every group has the right size, so nothing fails
// until the numbers are wrong -- or, on a cluster, until tp's allreduces
// cross nodes. The check compares each group with the ranks that differ from
// this one in that coordinate only, world rank = (stage · dp + replica) · tp + slice.
DemoCheck mesh_wrong_axis_order(Comm& comm) {
  const Layout l{.pp = 2, .dp = 2, .tp = comm.size() / 4};
  DTW_CHECK_ARG(l.ranks() == comm.size(), "mesh-wrong-axis-order runs on 8 ranks, not " << comm.size());
  const train::Grid grid(comm, {{"pp", l.pp}, {"tp", l.tp}, {"dp", l.dp}});  // the bug
  const int me = comm.rank(), slice = me % l.tp, replica = me / l.tp % l.dp, stage = me / (l.tp * l.dp);
  struct Axis {
    const char* name;
    std::vector<int> should;
  };
  std::vector<Axis> axes{{"tp", {}}, {"dp", {}}, {"pp", {}}};
  for (int k = 0; k < l.tp; ++k) axes[0].should.push_back((stage * l.dp + replica) * l.tp + k);
  for (int d = 0; d < l.dp; ++d) axes[1].should.push_back((stage * l.dp + d) * l.tp + slice);
  for (int s = 0; s < l.pp; ++s) axes[2].should.push_back((s * l.dp + replica) * l.tp + slice);
  for (const Axis& a : axes) {
    const std::vector<int> is = members(grid.group(a.name), me);
    DTW_CHECK_ARG(is == a.should, "rank " << me << "'s " << a.name << " group is ranks " << list(is)
                                          << ", should be " << list(a.should)
                                          << ": the grid was built pp × tp × dp (dp innermost), so "
                                             "the tp ranks of a stage are not neighbours");
  }
  return {true, "every group holds the peers the layout implies", 0};
}

// The head's share of the tied wte's gradient never reaches the embedding's
// stage (NVIDIA/Megatron-LM#844): the embedding's stage steps wte with its own
// share only. Chapter 05's executor always adds the head's share before the
// end of the step, so this variant takes it back out there: the head's stage
// sends its share again and the embedding's stage subtracts it ((a + b) − b,
// a to rounding), then ends the step as 08.3 does. Everything else is
// train_hybrid.
constexpr int kShareAgainTag = 9;  // not one of the executor's tags

void train_without_tied_sum(train::RankRun<double>& run, const Layout& layout) {
  const train::RunSpec& spec = run.spec();
  check_layout(spec, layout, run.comm().size(), run.comm().rank());
  const train::Grid grid = make_grid(run.comm(), layout);
  const Groups groups = groups_of(grid);
  const int m = layout.micro_batches;
  const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, m, nullptr);
  const Coords at{.stage = groups.pp->rank(), .replica = groups.dp->rank(), .slice = groups.tp->rank()};
  const std::vector<train::Range> stepped = hybrid_plan(spec, layout, map, at).optimizer;
  train::Replica<double> replica(spec, run.exec(), hybrid_plan(spec, layout, map, at));
  ch06::MegatronSeams<double> seams(*groups.tp);
  replica.set_seams(&seams);
  const model::ModelConfig c = spec.config();
  const std::int64_t wte_end =
      model::tied_wte(c, model::param_layout(c, ch06::megatron_shard(c, at.slice, layout.tp))).end;
  ch05::ExecutorHooks<double> hooks;
  hooks.micro_batches = [&](std::int64_t step, int mb, int micro_batches) {
    return train::micro_batch(spec, step, at.replica, layout.dp, mb, micro_batches);
  };
  hooks.end_of_step = [&](const ch05::StepEnd<double>& end) {
    const std::span<double> g = end.replica.grads(0, wte_end);
    if (at.stage == layout.pp - 1) end.comm.send(std::span<const double>(g), 0, kShareAgainTag);
    if (at.stage == 0) {
      std::vector<double> head_share(g.size());
      end.comm.recv(std::span<double>(head_share), layout.pp - 1, kShareAgainTag);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] -= head_share[i];  // the bug
    }
    return hybrid_end_of_step(groups, layout, stepped, end);
  };
  ch05::Executor<double> executor(run, *groups.pp, replica, map, {}, hooks);
  const ch05::Schedule schedule = ch05::make_schedule(ch05::ScheduleKind::kOneFOneB, layout.pp, m);
  for (std::int64_t step = 0; step < spec.steps; ++step)
    run.record_loss(step, executor.step(schedule.actions[static_cast<std::size_t>(at.stage)], step, m));
  run.report(replica);
}

DemoCheck tied_embedding_not_summed(Comm& comm) {
  const train::RunSpec spec = demo_run(1);  // one step: the losses agree, the parameters do not
  train::RankRun<double> run(comm, spec, {});
  train_without_tied_sum(run, Layout{.pp = 2, .dp = comm.size() / 4, .tp = 2, .micro_batches = 2});
  return compare(comm, spec, run,
                 " (tied embedding not summed: the embedding's stage stepped the tied table with "
                 "its own share of the gradient only; the head's share never arrived)");
}

// Groups created in a different order on different ranks (laekov/fastmoe#106).
// The tp groups are split from each stage's communicator, the dp groups from
// the world; replica 0 makes tp's first, the other replicas dp's first. A
// split is collective over its parent: replica 0's ranks wait in their
// stage's split for the ranks of replica 1, which wait in the world's split
// for replica 0. On threads the deadlock detector names the cycle; on MPI it
// is the hang the issue reports.
DemoCheck groups_created_out_of_order(Comm& comm) {
  const Layout l{.pp = 2, .dp = 2, .tp = comm.size() / 4};
  DTW_CHECK_ARG(l.ranks() == comm.size(), "groups-created-out-of-order runs on 8 ranks, not " << comm.size());
  const int me = comm.rank(), slice = me % l.tp, replica = me / l.tp % l.dp, stage = me / (l.tp * l.dp);
  const std::unique_ptr<Comm> stage_comm = comm.split(stage, me);  // every rank, same order: fine
  std::unique_ptr<Comm> tp, dp;
  const auto make_tp = [&] { tp = stage_comm->split(replica, slice); };
  const auto make_dp = [&] { dp = comm.split(stage * l.tp + slice, replica); };
  if (replica == 0) {  // the bug: the order depends on the rank
    make_tp();
    make_dp();
  } else {
    make_dp();
    make_tp();
  }
  return {true, "groups made", 0};
}

void register_pitfall(const char* name, const char* description, const char* catches,
                      bool deadlock, DemoCheck (*fn)(Comm&)) {
  register_demo({.name = name, .chapter = "08", .description = description,
                 .default_ranks = 8, .min_ranks = 8, .max_ranks = 8,
                 .expects_deadlock = deadlock, .catches = catches, .run = fn});
}

const bool kRegistered = [] {
  register_demo({.name = "hybrid", .chapter = "08",
                 .description = "gpt-tiny on pp 2 × dp 2 × tp 2 (8 ranks): 1F1B × Megatron × DP, vs the reference",
                 .default_ranks = 8, .min_ranks = 8, .max_ranks = 8,
                 .expects_deadlock = false, .catches = "", .run = hybrid_demo});
  register_pitfall("mesh-wrong-axis-order",
                   "grid built pp × tp × dp, dp innermost (torchtitan#286, picotron#17): groups of the right size, wrong peers",
                   "group is ranks", false, mesh_wrong_axis_order);
  register_pitfall("tied-embedding-not-summed",
                   "head's share of the tied wte gradient not sent to the embedding's stage (Megatron-LM#844)",
                   "tied embedding not summed", false, tied_embedding_not_summed);
  register_pitfall("groups-created-out-of-order",
                   "ranks make their tp and dp groups in different orders (fastmoe#106): the splits wait on each other",
                   "split", true, groups_created_out_of_order);
  return true;
}();

}  // namespace
}  // namespace dtw::ch08
