// Step 08.4: the composed run. Nothing here is a new algorithm: chapter 06's
// seams cut every layer over the tp group, chapter 05's executor runs 1F1B
// over the pp group, the training layer's micro-batch rule gives each dp
// replica its share of the batch, and step 08.3 ends every step. The lesson
// is the glue: which group each piece gets, and that every rank builds the
// same pieces in the same order (the chapter text: "The composition").
#include <string>

#include "dtw/train/replicated.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

template <TrainElement T>
void train_hybrid(train::RankRun<T>& run, const Layout& layout) {
  const train::RunSpec& spec = run.spec();
  // @lab 08.4: Compose the run (the layout checked first, on every rank): the grid and its groups, this rank's replica with Megatron's seams on its tp group, the executor on its pp group with this replica's micro-batches and 08.3's end of step; train, record, report.
  // @hint 1: Every piece exists: chapter 06 cuts the layers over one group, chapter 05 runs a
  // @hint 1: pipeline over another with hooks for where its micro-batches come from and how its
  // @hint 1: step ends, the training layer says which rows replica d of dp trains. Give each piece
  // @hint 1: its group, and cut the model into stages the same way on every rank.
  // @hint 2: check_layout with the world's size and this rank; make_grid, groups_of; the stage
  // @hint 2: map from the whole model's units by parameters with no communicator (every rank
  // @hint 2: computes the same cut); this rank's Coords from the groups' ranks; the Replica of
  // @hint 2: hybrid_plan, with its seams set before the executor makes its passes; hooks:
  // @hint 2: micro_batches from train::micro_batch with this replica's coordinate and dp,
  // @hint 2: end_of_step calling hybrid_end_of_step with the ranges of the plan without ZeRO-1;
  // @hint 2: the 1F1B schedule for pp stages; each step's loss recorded; the replica reported.
  // @hint 3: ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, m, nullptr);
  // @hint 3: train::Replica<T> replica(spec, run.exec(), plan); replica.set_times(run.layer_times());
  // @hint 3: ch06::MegatronSeams<T> seams(*groups.tp); replica.set_seams(&seams) for a GPT only (an
  // @hint 3: MLP has no seams);
  // @hint 3: ch05::ExecutorHooks<T> hooks; ch05::Executor<T> executor(run, *groups.pp, replica, map,
  // @hint 3: {}, hooks); ch05::make_schedule(ch05::ScheduleKind::kOneFOneB, pp, m).actions[stage];
  // @hint 3: run.record_loss(step, executor.step(actions, step, m)); run.report(replica).
  // The glue: which group each piece gets; every rank builds the same pieces
  // in the same order.
  //
  //     world ──Grid(pp, dp, tp)──► groups                         (08.1)
  //     spec ──stage map (same cut everywhere)──► map
  //     (map, coords) ──hybrid_plan──► Replica ◄── MegatronSeams(tp)    (08.2)
  //     Executor(pp, hooks{micro_batch(replica of dp), end of step})   (08.3)
  //     for every step: executor.step(1F1B's list for this stage)
  //
  // Per step and rank: tp's 4L + 2 allreduces of (rows of a micro-batch) · C
  // values per micro-batch and the vocab-parallel loss's two small ones; pp's
  // 2m boundary messages per stage boundary; dp's one gradient allreduce
  // (ZeRO-1: a reduce-scatter and an allgather); one allreduce of {Σ g², loss}.
  check_layout(spec, layout, run.comm().size(), run.comm().rank());
  const train::Grid grid = make_grid(run.comm(), layout);
  const Groups groups = groups_of(grid);
  const int m = layout.micro_batches;
  const ch05::StageMap map =
      ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, m, nullptr);
  const Coords at{.stage = groups.pp->rank(), .replica = groups.dp->rank(), .slice = groups.tp->rank()};
  Layout whole = layout;
  whole.zero1 = false;
  const std::vector<train::Range> stepped = hybrid_plan(spec, whole, map, at).optimizer;
  train::Replica<T> replica(spec, run.exec(), hybrid_plan(spec, layout, map, at));
  replica.set_times(run.layer_times());
  ch06::MegatronSeams<T> seams(*groups.tp);
  if (spec.config().kind == model::ModelKind::kGpt) replica.set_seams(&seams);  // an MLP has none
  ch05::ExecutorHooks<T> hooks;
  hooks.micro_batches = [&](std::int64_t step, int mb, int micro_batches) {
    return train::micro_batch(spec, step, at.replica, layout.dp, mb, micro_batches);
  };
  hooks.end_of_step = [&](const ch05::StepEnd<T>& end) {
    return hybrid_end_of_step(groups, layout, stepped, end);
  };
  ch05::Executor<T> executor(run, *groups.pp, replica, map, {}, hooks);
  const ch05::Schedule schedule = ch05::make_schedule(ch05::ScheduleKind::kOneFOneB, layout.pp, m);
  const auto& actions = schedule.actions[static_cast<std::size_t>(at.stage)];
  for (std::int64_t step = 0; step < spec.steps; ++step)
    run.record_loss(step, executor.step(actions, step, m));
  run.report(replica);
  // @end
}

template <TrainElement T>
void hybrid(train::RankRun<T>& run) {
  train_hybrid(run, layout_from_knobs(run.knobs(), run.spec(), run.comm().size()));
}

template void train_hybrid<float>(train::RankRun<float>&, const Layout&);
template void train_hybrid<double>(train::RankRun<double>&, const Layout&);
template void hybrid<float>(train::RankRun<float>&);
template void hybrid<double>(train::RankRun<double>&);

}  // namespace dtw::ch08
