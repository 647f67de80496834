#pragma once
/// @file
/// Chapter 04 — ZeRO and FSDP: data parallelism in which no state is
/// replicated that need not be.
///
/// Every strategy here trains like DDP: rank r computes the gradient of its
/// share of the batch, and together the ranks take the step one device takes
/// on the whole batch. What changes from stage to stage is who keeps what:
///
///     stage    parameters   gradients     optimizer state   strategy
///     DDP      all          all           all               (chapter 02)
///     ZeRO-1   all          all           own shards        zero1
///     ZeRO-2   all          own shards    own shards        zero2
///     ZeRO-3   own shards   own shards    own shards        zero3, zero3-prefetch
///
/// A *shard* is one rank's chunk of one unit (Sharding). The steps of the lab:
/// 04.1 reduce-scatter gradients and allgather parameters (ZeRO-1), 04.2 keep
/// only the gradient shard (ShardedGrads, ZeRO-2), 04.3 gather parameters
/// unit by unit (GatheredParams, ZeRO-3), 04.4 gather ahead (prefetch), 04.5
/// save and load sharded checkpoints that reshard (sharded_checkpoint.h).
/// Sharding and ZeroOptions, which every step uses, are in sharding.h.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtw/array.h"
#include "dtw/comm.h"
#include "dtw/model/units.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"
#include "sharded_checkpoint.h"  // step 04.5
#include "sharding.h"            // Sharding, ZeroOptions

namespace dtw::ch04 {

// ---- step 04.1: ZeRO-1 ----------------------------------------------------------

/// Reduce-scatters every unit's gradient in place: afterwards this rank's
/// chunk of each unit, replica.grads(sharding.shard(u, r)), is the sum over
/// the ranks; the rest of the buffer is scratch. The replica holds every
/// gradient. Bytes sent per rank: Σ_u (size_u − its chunk) values (ring).
template <TrainElement T>
void reduce_scatter_grads(Comm& comm, const Sharding& sharding, train::Replica<T>& replica);

/// Allgathers every unit's parameters in place: each rank's chunk of each
/// unit (the one it stepped) goes to every rank. The replica holds every
/// parameter. Bytes sent per rank: Σ_u (size_u − chunk of rank r + 1) values.
template <TrainElement T>
void allgather_params(Comm& comm, const Sharding& sharding, train::Replica<T>& replica);

// ---- step 04.2: ZeRO-2, the gradient half -----------------------------------------

/// Gradients kept only as shards. The backward accumulates each unit's
/// gradient into a temporary full-size buffer of that unit (an Array in
/// kGradients); when the unit's GradReady fires, the buffer is reduce-scattered
/// in place, this rank's chunk is *added* to its shard in the replica (so
/// micro-batches accumulate there) and the buffer is freed. No full gradient
/// of the model ever exists.
template <TrainElement T>
class ShardedGrads {
 public:
  /// Gradients of `replica`, which holds (at least) this rank's shards.
  ShardedGrads(Comm& comm, const Sharding& sharding, train::Replica<T>& replica);
  /// Where the backward accumulates unit u's gradient: the unit's buffer,
  /// made (zeroed) on the first call of a pass.
  T* grads(int unit);
  /// The GradReady hook: unit [begin, end) is final; reduce-scatter its
  /// buffer, add this rank's chunk to the shard, free the buffer.
  void ready(std::int64_t begin, std::int64_t end);
  /// Units whose buffers exist now (0 between passes).
  int live_units() const;

 private:
  Comm& comm_;
  const Sharding& sharding_;
  train::Replica<T>& replica_;
  std::vector<Array<T>> buffers_;  // per unit; empty when not live
};

// ---- steps 04.3 and 04.4: ZeRO-3, the parameter half ------------------------------

/// Parameters kept only as shards, gathered a unit at a time: params(u)
/// returns the whole unit (a temporary Array in kParameters, gathered in
/// place from every rank's chunk), release(u) frees it. With a prefetch depth
/// d > 0 it also starts the gathers of the next d units in the order the
/// first pass asked for them (FSDP's recorded execution order), so at most
/// 1 + d units (and the tied embedding the head borrows) are held at once.
/// Every rank must ask for the same units in the same order: the gathers are
/// collectives. A fingerprint naming the unit is exchanged before each
/// gather made on demand, every gather of the first pass included, when the
/// collective check is on (Comm::verify_collectives); a prefetched gather
/// needs none, because every later pass must ask in the recorded order (an
/// InvalidArgument naming the rank, the position and the units otherwise).
template <TrainElement T>
class GatheredParams {
 public:
  /// Parameters of `replica`, which holds this rank's shards; `prefetch` ≥ 0
  /// units are gathered ahead (InvalidArgument naming the rank otherwise).
  GatheredParams(Comm& comm, const Sharding& sharding, train::Replica<T>& replica,
                 int prefetch = 0);
  ~GatheredParams();
  /// Unit u's parameters, whole; valid until the matching release(u).
  const T* params(int unit);
  /// The pass is done with unit u for now: free its copy.
  void release(int unit);
  /// Call before each forward: the next params() call is the first of a pass.
  void begin_pass();
  /// Units whose copies exist now, gathered or in flight.
  int live_units() const;

 private:
  struct Unit;
  void gather_now(int unit);
  void prefetch_after(int position);
  void take(int unit);
  void progress();  // polls every gather in flight (step 04.4)
  Comm& comm_;
  const Sharding& sharding_;
  train::Replica<T>& replica_;
  int depth_;
  std::vector<std::unique_ptr<Unit>> units_;  // per unit: its copy, holders, gather in flight
  std::vector<int> order_;  // units in the order the first pass asked for them
  int position_ = 0;        // calls of params() so far in this pass
  bool recorded_ = false;   // order_ is complete
};

/// The model's view of a ZeRO rank (model::UnitAccess): gradients from a
/// ShardedGrads, parameters either from the replica's full copy (ZeRO-2) or
/// gathered (ZeRO-3). It also marks each unit's compute as a phase of the
/// timeline (with its FLOPs, for the modeled fabric), between the gathers,
/// so that waiting for a gather never counts as compute.
template <TrainElement T>
class ZeroAccess final : public model::UnitAccess<T> {
 public:
  /// ZeRO-2: every parameter is in `replica`.
  ZeroAccess(train::Replica<T>& replica, ShardedGrads<T>& grads);
  /// ZeRO-3: parameters come from `params`.
  ZeroAccess(train::Replica<T>& replica, GatheredParams<T>& params, ShardedGrads<T>& grads);
  ~ZeroAccess() override;
  /// Before each forward: the pass's rows (for the phases' FLOPs), its
  /// micro-batch, and where phases are recorded (nullptr: none).
  void begin_pass(train::RankRun<T>* run, const train::Batch& batch, int micro_batch);
  const T* params(int unit) override;
  void release_params(int unit) override;
  T* grads(int unit) override { return grads_.grads(unit); }

 private:
  struct Phases;
  train::Replica<T>& replica_;
  GatheredParams<T>* gathered_ = nullptr;
  ShardedGrads<T>& grads_;
  std::unique_ptr<Phases> phases_;
};

// ---- the strategies ------------------------------------------------------------------

/// ZeRO-1 (knobs: micro_batches, save, save_after, resume).
template <TrainElement T>
void zero1(train::RankRun<T>& run);
/// ZeRO-2 (the same knobs).
template <TrainElement T>
void zero2(train::RankRun<T>& run);
/// ZeRO-3 / FSDP without prefetch (the same knobs, and prefetch, default 0).
template <TrainElement T>
void zero3(train::RankRun<T>& run);
/// ZeRO-3 with prefetch (knob prefetch, default 1).
template <TrainElement T>
void zero3_prefetch(train::RankRun<T>& run);
/// Any stage with explicit options (the strategies above call this; tests
/// use it to try bad options).
template <TrainElement T>
void train_zero(train::RankRun<T>& run, const ZeroOptions& options);
/// Any stage on `comm` instead of the run's world: its ranks shard the model
/// and the step's batch among themselves (micro-batch k of rank r is
/// train::micro_batch_shard(r, comm.size(), k, m)), and every collective,
/// the end of the step's and the checkpoint's included, stays inside it. So
/// a composed run (chapter 08) can give ZeRO a sub-group of its world (a
/// Grid's group). Each group trains, records and reports on its own; options
/// are checked against `comm`'s rank and size.
template <TrainElement T>
void train_zero(train::RankRun<T>& run, Comm& comm, const ZeroOptions& options);

// ---- pitfalls from the field: broken on purpose (dtw run pitfall NAME) ----------------

/// ZeRO-3 in which rank 1 runs block h.0 once more than the other ranks do,
/// as a data-dependent loop or an early exit would (deepspeedai/DeepSpeed
/// #7998, #8262: the ranks' gathers stop pairing up and the job hangs). Turns
/// the collective check on, so the fingerprint of the first gather that
/// differs names the ranks and the layers: a CollectiveMismatch whose message
/// contains "zero3 gather".
template <TrainElement T>
void zero3_rank_runs_a_layer_twice(train::RankRun<T>& run);

/// ZeRO-2 with m ≥ 2 micro-batches whose gradient hook reduce-scatters only
/// during the first micro-batch (the flag that says "this step's reduction
/// has started" is reset only at the step: InfiniTensor/InfiniTrain#213).
/// The other micro-batches' gradients never reach their owners and the run
/// drifts from the reference, which the harness names tensor by tensor.
template <TrainElement T>
void zero2_reduces_before_accumulation_ends(train::RankRun<T>& run);

}  // namespace dtw::ch04
