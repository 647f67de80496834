// The part of a ZeRO step that does not depend on the stage (zero_run.h), and
// the strategies' entry points.
//
// Data: micro-batch k of rank r reads shard r·m + k of p·m (the training
// layer's rule, train/micro_batches.h), so the p·m shards together are the
// reference's whole batch, and each shard's gradient enters with the weight
// of its rows (rows / batch). A batch that does not divide still averages
// exactly.
//
// The group is whatever communicator ZeroRun is given (the world by
// default): every collective below and in the stages goes through comm().
//
// The end of a step needs two global numbers: the mean loss (for the log) and
// the gradient norm (for the clip). After the reduce-scatter each rank holds
// the final gradient of its own shards only, so the global Σ g² is the sum of
// the shards' sums: one allreduce of two values carries both.
#include <array>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "dtw/train/micro_batches.h"
#include "zero_run.h"

namespace dtw::ch04 {

template <class T>
ZeroRun<T>::ZeroRun(train::RankRun<T>& run, const ZeroOptions& options)
    : ZeroRun(run, run.comm(), options) {}

template <class T>
ZeroRun<T>::ZeroRun(train::RankRun<T>& run, Comm& comm, const ZeroOptions& options)
    : run_(run), comm_(comm), options_(options), sharding_(Sharding::of(run.spec(), comm.size())) {
  options_.validate(comm.rank(), comm.size(), run.spec());
}

template <class T>
train::ReplicaPlan ZeroRun<T>::plan() const {
  // @lab 04.1: Return what this rank holds at options_.stage: its parameter, gradient and optimizer ranges (the table in zero.h).
  // @hint 1: Each stage keeps one more kind of state only as this rank's shards:
  // @hint 1: ZeRO-1 the optimizer state, ZeRO-2 the gradients too, ZeRO-3 the
  // @hint 1: parameters too. What is not sharded is held whole.
  // @hint 2: mine = this rank's shards, whole = the one range [0, Ψ); a plan is
  // @hint 2: {params, grads, optimizer}. Trap: the optimizer ranges are the ranges
  // @hint 2: this rank steps; the whole model there is DDP's memory (every rank
  // @hint 2: stepping every parameter), which the values alone never show.
  // @hint 3: mine = sharding_.owned(comm_.rank()); all = {{0, sharding_.model_size()}};
  // @hint 3: stage 1: {all, all, mine}; 2: {all, mine, mine}; 3: {mine, mine, mine}.
  const std::vector<train::Range> mine = sharding_.owned(comm_.rank());
  const std::vector<train::Range> all = {{0, sharding_.model_size()}};
  switch (options_.stage) {
    case 1: return {all, all, mine};    // ZeRO-1: full parameters and gradients
    case 2: return {all, mine, mine};   // ZeRO-2: full parameters
    default: return {mine, mine, mine};  // ZeRO-3: shards only
  }
  // @end
}

template <class T>
std::int64_t ZeroRun<T>::start(train::Replica<T>& replica) {
  if (options_.resume_dir.empty()) return 0;
  const CheckpointInfo info = load_checkpoint(comm(), replica, options_.resume_dir);
  DTW_CHECK_ARG(info.steps_done <= spec().steps,
                "rank " << comm().rank() << ": checkpoint " << options_.resume_dir << " is after "
                        << info.steps_done << " steps; this run has only " << spec().steps);
  // The log of the steps before the checkpoint continues where it stopped;
  // they are the checkpoint's, not computed here (the rate counts only ours).
  run_.record_resumed(std::span<const double>(info.losses.data(),
                                              static_cast<std::size_t>(info.steps_done)));
  return info.steps_done;
}

template <class T>
double ZeroRun<T>::micro_batch(train::Replica<T>& replica, std::int64_t step, int k,
                               const model::GradReady& on_ready, ZeroAccess<T>* access,
                               model::UnitAccess<T>* model_access) {
  const auto [shard, shards] =
      train::micro_batch_shard(comm().rank(), comm().size(), k, options_.micro_batches);
  const train::Batch rows = train::make_batch(spec(), step, shard, shards);
  const T weight = static_cast<T>(rows.weight);
  // The model reports a block's gradients tensor by tensor; ZeRO reduces and
  // frees a unit's gradient buffer as a whole, so it hears of whole units.
  const model::GradReady units_ready =
      on_ready ? model::whole_units(replica.units(), on_ready) : model::GradReady();
  if (access != nullptr) {
    // Each unit's compute is its own phase, between the gathers (zero_access.cpp).
    access->begin_pass(&run_, rows, k);
    model::UnitAccess<T>* through = model_access != nullptr ? model_access : access;
    return rows.weight *
           replica.forward_backward(step, shard, shards, weight, units_ready, through);
  }
  const train::Cost cost = replica.pass_cost(replica.network().all(), rows, true);
  auto phase =
      run_.phase("forward-backward", {.micro_batch = k, .flops = cost.flops, .bytes = cost.bytes});
  return rows.weight * replica.forward_backward(step, shard, shards, weight, units_ready);
}

template <class T>
void ZeroRun<T>::end_step(train::Replica<T>& replica, std::int64_t step, double loss) {
  std::array<double, 2> global = {0, 0};  // the step's mean loss, the global Σ g²
  // @lab 04.1: Fill `global` with the step's loss and the gradient's sum of squares, both summed over the ranks, in one collective.
  // @hint 1: After the reduce-scatter each rank holds the final gradient of its
  // @hint 1: own shards only, so no rank can compute the clipping norm alone:
  // @hint 1: the global sum of squares is the sum of the shards' sums. The mean
  // @hint 1: loss is a sum too (each rank's loss is already weighted).
  // @hint 2: global = {loss, this rank's Σ g² over its optimizer ranges}; sum both
  // @hint 2: over the ranks in one allreduce of two values (inside a communication
  // @hint 2: phase named "allreduce loss and norm"). Trap: the local Σ g² alone
  // @hint 2: clips every rank by a different norm.
  // @hint 3: global = {loss, replica.local_sum_of_squares()}; communicate("allreduce
  // @hint 3: loss and norm", [&] { ch01::allreduce(comm(), std::span<double>(global),
  // @hint 3: ReduceOp::kSum); }).
  global = {loss, replica.local_sum_of_squares()};
  communicate("allreduce loss and norm",
              [&] { ch01::allreduce(comm(), std::span<double>(global), ReduceOp::kSum); });
  // @end
  {
    const train::Cost cost = replica.optimizer_cost();
    auto phase = run_.phase("optimizer", {.flops = cost.flops, .bytes = cost.bytes});
    // @lab 04.1: Clip this rank's gradient by the global norm in `global`, then step its optimizer ranges.
    // @hint 1: Clipping scales the whole gradient by one factor, from the norm of
    // @hint 1: the whole gradient. Each rank holds a piece of it, so each must use
    // @hint 1: the summed norm, or the pieces are scaled differently and the step
    // @hint 1: is no longer the single-device step.
    // @hint 2: clip with the global Σ g² (the allreduce's second value), then step:
    // @hint 2: the replica steps only its optimizer ranges (this rank's shards).
    // @hint 2: Trap: the local Σ g² gives each rank its own factor; with AdamW the
    // @hint 2: first steps barely show it, with SGD every step does.
    // @hint 3: replica.clip(global[1]); replica.step(step).
    replica.clip(global[1]);
    replica.step(step);  // the optimizer ranges: this rank's shards
    // @end
  }
  run_.record_loss(step, global[0]);
  const std::int64_t done = step + 1;
  const std::int64_t save_at = options_.save_after > 0 ? options_.save_after : spec().steps;
  if (!options_.save_dir.empty() && done == save_at)
    save_checkpoint(comm(), replica, options_.save_dir, done, run_.losses());
}

template <class T>
void ZeroRun<T>::finish(train::Replica<T>& replica) {
  run_.report(replica);
}

template <TrainElement T>
void train_zero(train::RankRun<T>& run, const ZeroOptions& options) {
  train_zero(run, run.comm(), options);
}

template <TrainElement T>
void train_zero(train::RankRun<T>& run, Comm& comm, const ZeroOptions& options) {
  ZeroRun<T> z(run, comm, options);
  switch (options.stage) {
    case 1: return run_zero1(z);
    case 2: return run_zero2(z);
    default: return run_zero3(z);
  }
}

template <TrainElement T>
void zero1(train::RankRun<T>& run) { train_zero(run, ZeroOptions::from_knobs(run.knobs(), 1)); }
template <TrainElement T>
void zero2(train::RankRun<T>& run) { train_zero(run, ZeroOptions::from_knobs(run.knobs(), 2)); }
template <TrainElement T>
void zero3(train::RankRun<T>& run) { train_zero(run, ZeroOptions::from_knobs(run.knobs(), 3)); }
template <TrainElement T>
void zero3_prefetch(train::RankRun<T>& run) {
  train_zero(run, ZeroOptions::from_knobs(run.knobs(), 3, /*default_prefetch=*/1));
}

#define DTW_INSTANTIATE(T)                                              \
  template class ZeroRun<T>;                                            \
  template void train_zero<T>(train::RankRun<T>&, const ZeroOptions&); \
  template void train_zero<T>(train::RankRun<T>&, Comm&, const ZeroOptions&); \
  template void zero1<T>(train::RankRun<T>&);                           \
  template void zero2<T>(train::RankRun<T>&);                           \
  template void zero3<T>(train::RankRun<T>&);                           \
  template void zero3_prefetch<T>(train::RankRun<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch04
