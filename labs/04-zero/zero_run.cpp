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
  DTW_TODO("04.1: Return what this rank holds at options_.stage: its parameter, gradient and optimizer ranges (the table in zero.h).");
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
  DTW_TODO("04.1: Fill `global` with the step's loss and the gradient's sum of squares, both summed over the ranks, in one collective.");
  {
    const train::Cost cost = replica.optimizer_cost();
    auto phase = run_.phase("optimizer", {.flops = cost.flops, .bytes = cost.bytes});
    DTW_TODO("04.1: Clip this rank's gradient by the global norm in `global`, then step its optimizer ranges.");
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
