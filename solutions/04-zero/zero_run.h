#pragma once
// What every ZeRO stage does the same way, so that each stage's file shows
// only what the stage changes: the options and the sharding, the micro-batches
// of a step, the end of a step (the global loss and gradient norm, clip, step,
// record), and checkpoints. Not a lab step: read it once, then use it.
#include <cstdint>

#include "dtw/comm.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "zero.h"

namespace dtw::ch04 {

template <class T>
class ZeroRun {
 public:
  /// Checks `options` on this rank before any message (a clear error, never a
  /// hang). The ZeRO group is the run's world.
  ZeroRun(train::RankRun<T>& run, const ZeroOptions& options);
  /// The same with `comm` as the ZeRO group (any communicator: a sub-group
  /// of the world in a composed run). Every collective of the stages goes
  /// through comm(), so none of them reaches a rank outside it.
  ZeroRun(train::RankRun<T>& run, Comm& comm, const ZeroOptions& options);

  train::RankRun<T>& run() { return run_; }
  /// The ZeRO group: the ranks that shard the model and the step's batch.
  Comm& comm() { return comm_; }
  const train::RunSpec& spec() const { return run_.spec(); }
  const ZeroOptions& options() const { return options_; }
  const Sharding& sharding() const { return sharding_; }

  /// What this rank holds at its stage: the ReplicaPlan of the table in zero.h.
  train::ReplicaPlan plan() const;
  /// Loads the checkpoint of options().resume_dir into `replica` (recording
  /// the losses it lists) and returns the first step to train; 0 without one.
  std::int64_t start(train::Replica<T>& replica);
  /// Forward and backward of micro-batch k of `step`: rows shard_rows(r·m + k
  /// of p·m: train::micro_batch_shard, r and p of comm()), its gradient added with the weight of its rows. Returns the
  /// weighted loss (its share of the global mean). Without an access the
  /// replica's own buffers are used and the pass is one compute phase; with
  /// one, the access marks each unit's phase (`model_access`, if given, is
  /// what the model calls instead: a wrapper around `access`). `on_ready`
  /// hears of whole units (model::whole_units), last unit first.
  double micro_batch(train::Replica<T>& replica, std::int64_t step, int k,
                     const model::GradReady& on_ready = {}, ZeroAccess<T>* access = nullptr,
                     model::UnitAccess<T>* model_access = nullptr);
  /// The end of a step, once this rank's shard of the gradient is final:
  /// one allreduce (over comm()) of {loss, Σ g² of the shard}, the clip by the global
  /// norm, the optimizer step of the shard, record_loss, and a checkpoint
  /// when one is due.
  void end_step(train::Replica<T>& replica, std::int64_t step, double loss);
  /// Reports the parameters this rank holds to the harness.
  void finish(train::Replica<T>& replica);
  /// Runs f() as a communication phase `name` of the timeline (tracing only:
  /// what f does is the stage's business).
  template <class F>
  void communicate(const char* name, F&& f) {
    auto phase = run_.phase(name, {.compute = false});
    f();
  }

 private:
  train::RankRun<T>& run_;
  Comm& comm_;
  ZeroOptions options_;
  Sharding sharding_;
};

// The stages, one file each; train_zero picks one.
template <class T>
void run_zero1(ZeroRun<T>& z);
template <class T>
void run_zero2(ZeroRun<T>& z);
template <class T>
void run_zero3(ZeroRun<T>& z);

}  // namespace dtw::ch04
