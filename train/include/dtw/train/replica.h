#pragma once
/// @file
/// `Replica<T>`: one rank's share of the model — parameters, gradients and
/// optimizer state of the ranges of the flat buffer it holds, in `Array`s
/// counted by the rank's memory ledger — and the only way a strategy
/// computes gradients, clips and steps.
///
///     Replica<T> replica(spec, comm.exec(), ReplicaPlan::whole(spec));   // DDP
///     for (std::int64_t step = 0; step < spec.steps; ++step) {
///       // Weight this rank's gradient by its share of the batch (rows / B,
///       // Batch::weight) before the sum, so the allreduce's sum is the mean
///       // gradient of the whole batch for any split, even or not.
///       const T weight = T(make_batch(spec, step, comm.rank(), comm.size()).weight);
///       double loss = replica.forward_backward(step, comm.rank(), comm.size(),
///                                              weight, on_grad_ready);
///       ... allreduce replica.grads() (a sum: nothing to divide afterwards) ...
///       replica.clip(replica.local_sum_of_squares());  // full grads: local is global
///       replica.step(step);
///     }
///
/// `train_reference` is exactly this loop with one shard on one device, so a
/// strategy and the reference share the clipping rule, the optimizer and the
/// order of operations by construction.
///
/// **What a replica holds** is a ReplicaPlan: lists of ranges of the flat
/// buffer for parameters, gradients and optimizer state. DDP holds everything;
/// ZeRO-1 full parameters and gradients but optimizer state for its shard;
/// ZeRO-2 full parameters, gradients and state for its shard; ZeRO-3 / FSDP
/// its shard of every unit; a pipeline stage the range of its units (plus wte
/// on a last stage with a tied head); a parameter server the shard it serves.
/// The pieces of each list are stored back to back in one Array.
///
/// **A replica often holds a shard.** The plan's `shard` (model/shard.h) says
/// which part of each tensor the rank computes: a tensor-parallel rank holds
/// rows of a column-parallel weight, a column block of a row-parallel one, the
/// q, k, v rows of its heads and a vocabulary slice; a sequence-parallel rank
/// holds every tensor but only some tokens. The plan's ranges are then ranges
/// of the *shard's* flat buffer (param_layout(config, shard)), whose views
/// carry their place in the whole tensor: initialisation, the optimizer step
/// (element-wise, with each view's decay flag), the comparison with the
/// reference and `tensor(name)` all go through it, so strategy code never
/// computes a flat offset by hand. The model's own forward and backward run on
/// the shard and call the seams (`set_seams`, model/seams.h) where the
/// strategy's collectives go.
///
/// **Replicated tensors.** A plan names the tensors a rank holds whole while
/// the other ranks of a group hold the same copy (`Replication`: LayerNorm
/// gains and biases, row-parallel biases under tensor parallelism). The
/// clipping norm counts each of their elements once across the group
/// (local_sum_of_squares skips them on every member but the group's first),
/// and check_replicated (replicated.h) finds a copy that drifted.
///
/// Where it lives: everything above is an Array on the Exec it is given (the
/// host, or a CUDA device and stream: `dtw::Exec::cuda`, or a rank's
/// `comm.exec()` under LaunchOptions::device "cuda"), and so are the
/// network's activations; every kernel runs on `exec().place()`. The spans
/// it hands out are that memory: on a device, pass them to kernels and Comm,
/// or read them with kernels::to_host.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtw/array.h"
#include "dtw/comm.h"
#include "dtw/exec.h"
#include "dtw/model/seams.h"
#include "dtw/model/shard.h"
#include "dtw/model/units.h"
#include "dtw/train/network.h"
#include "dtw/train/run_spec.h"
#include "dtw/types.h"

namespace dtw::train {

/// [begin, end) of the flat parameter buffer.
struct Range {
  std::int64_t begin = 0;  ///< first element
  std::int64_t end = 0;    ///< one past the last element
  /// end − begin.
  std::int64_t size() const { return end - begin; }
};

/// The work of a phase, for the modeled fabric (PhaseInfo, fabric.h).
struct Cost {
  double flops = 0;  ///< matrix-product floating-point operations
  double bytes = 0;  ///< memory traffic of the element-wise rest
};

/// Tensors a rank holds whole while `group_size` ranks hold identical copies
/// (see the file comment); this rank is `group_rank` of them.
struct Replication {
  std::vector<std::string> tensors;  ///< names in the plan's layout
  int group_rank = 0;                ///< this rank's index in the group
  int group_size = 1;                ///< ranks that hold the same copy
  /// Every tensor of `layout` that the shard does not cut (view.is_whole()):
  /// tensor parallelism's replicated set (norms, row-parallel biases, wpe).
  static Replication uncut(const model::ParamLayout& layout, int group_rank, int group_size);
  /// True when `name` is listed.
  bool holds(std::string_view name) const;
};

/// What a replica holds: for each kind of state, sorted, disjoint ranges.
/// Every optimizer range must lie inside one parameter range and one gradient
/// range (stepping needs both). Lists may be empty (a worker that never steps
/// holds no optimizer state).
struct ReplicaPlan {
  std::vector<Range> params;     ///< parameters held (initialised from the seed)
  std::vector<Range> grads;      ///< gradients held (start at zero)
  std::vector<Range> optimizer;  ///< what step() updates (optimizer state held for these)
  /// The share of the model computed (whole by default); the ranges above are
  /// ranges of param_layout(config, shard).
  model::ModelShard shard;
  /// The tensors held replicated over a group (none by default).
  Replication replicated;

  /// The whole model, everything: DDP and the reference.
  static ReplicaPlan whole(const RunSpec& spec);
  /// One range, everything: a ZeRO-3 shard, a pipeline stage, a server's shard.
  static ReplicaPlan range(std::int64_t begin, std::int64_t end);
  /// Several ranges, everything (a pipeline stage with the tied wte).
  static ReplicaPlan ranges(std::vector<Range> ranges);
  /// All of `shard`'s local tensors, everything, with `replicated`.
  static ReplicaPlan slice(const RunSpec& spec, const model::ModelShard& shard,
                           Replication replicated = {});
  /// "params [0, 100) grads [0, 100) optimizer [0, 50)".
  std::string describe() const;
};

/// One rank's parameters, gradients and optimizer state (see the file comment).
template <TrainElement T>
class Replica {
 public:
  /// Holds `plan` of `spec`'s model on `exec` (the host or a CUDA device), counting
  /// parameters, gradients and optimizer state in exec.ledger(). Parameters
  /// start at init_params' values, gradients and state at zero. Ranges
  /// outside the model, unsorted or overlapping ones, and optimizer ranges not
  /// covered by parameters and gradients raise InvalidArgument naming the
  /// rank (the ledger's) and the ranges; a ledger cap smaller than the plan
  /// raises OutOfMemory naming the rank and the category.
  Replica(const RunSpec& spec, const Exec& exec, ReplicaPlan plan);
  Replica(Replica&&) noexcept;
  Replica& operator=(Replica&&) noexcept;
  ~Replica();

  /// The run.
  const RunSpec& spec() const { return spec_; }
  /// What this replica holds.
  const ReplicaPlan& plan() const { return plan_; }
  /// The model's flat layout (names and offsets of every tensor).
  const model::ParamLayout& layout() const;
  /// The model's units in forward order.
  const std::vector<model::Unit>& units() const;
  /// The model (for stage passes, FLOP counts and activation sizes).
  Network<T>& network();
  /// Elements in the whole model (layout().size()).
  std::int64_t model_size() const;

  // ---- state ------------------------------------------------------------------

  /// Parameters [begin, end) of the flat buffer, which must lie inside one
  /// held parameter range (InvalidArgument naming the rank and what is held).
  std::span<T> params(std::int64_t begin, std::int64_t end);
  /// Every held parameter, the pieces back to back (one range: that range).
  std::span<T> params();
  /// Gradients [begin, end), like params(begin, end).
  std::span<T> grads(std::int64_t begin, std::int64_t end);
  /// Every held gradient, the pieces back to back.
  std::span<T> grads();
  /// `grads(r.begin, r.end)`.
  std::span<T> grads(Range r) { return grads(r.begin, r.end); }
  /// `params(r.begin, r.end)`.
  std::span<T> params(Range r) { return params(r.begin, r.end); }
  /// Optimizer state of [begin, end), which must lie inside one optimizer
  /// range (InvalidArgument naming the rank and what is held): moment 0 is
  /// AdamW's m (SGD's momentum), moment 1 AdamW's v (SGD has none: an
  /// InvalidArgument). What a checkpoint saves and restores beside the
  /// parameters; a strategy never updates it by hand (step() does).
  std::span<T> optimizer_state(int moment, std::int64_t begin, std::int64_t end);
  /// One tensor of this replica's layout: its view (shape on this rank, and
  /// the slice of the whole tensor it holds), its parameters and its
  /// gradients (empty when not held). A tensor that is neither held whole in
  /// one parameter range nor in one gradient range raises InvalidArgument
  /// naming it and what is held.
  struct Tensor {
    const model::ParamView* view = nullptr;  ///< name, local shape, slice of the whole
    std::span<T> params;                     ///< [view->size] or empty
    std::span<T> grads;                      ///< [view->size] or empty
    /// The whole tensor's index of local element i.
    std::int64_t whole_index(std::int64_t i) const { return view->slice.whole_index(i); }
  };
  /// The tensor called `name` ("h.1.mlp.fc.weight").
  Tensor tensor(std::string_view name);
  /// The held parameters as runs of the *whole* model's flat buffer: (first
  /// whole offset, values), one entry per maximal run of consecutive whole
  /// offsets. What the comparison with the reference reads.
  std::vector<std::pair<std::int64_t, std::span<const T>>> whole_params();
  /// Where the collectives go in this replica's passes (and in StagePasses
  /// made after this call); nullptr: identity (model/seams.h).
  void set_seams(model::Seams<T>* seams);
  /// Moments the optimizer keeps per element: 2 for AdamW, 1 for SGD.
  int optimizer_moments() const;
  /// Sets every held gradient to zero (step() does it after updating).
  void zero_grads();
  /// Multiplies every held gradient by `factor` (1/p turns a sum into a mean).
  void scale_grads(T factor);

  // ---- computing ----------------------------------------------------------------

  /// Forward and backward of the whole model on step `step`'s data shard
  /// `shard` of `shards` (make_batch: rows split as evenly as possible),
  /// accumulating (+=) `loss_scale ×` the gradient of the shard's mean loss.
  /// `on_grad_ready(begin, end)` fires as each unit's gradient becomes final
  /// (units.h: last unit first, the embedding last). Returns the shard's mean
  /// loss; the global mean is Σ over shards of Batch::weight × loss.
  /// The activations are charged to the ledger (kActivations) from the
  /// forward to the end of the backward.
  /// `access` (nullptr: this replica's own buffers, which must then hold the
  /// parameters and gradients of every unit) lets ZeRO-2/3 supply per-unit
  /// parameters and gradient buffers (units.h: UnitAccess).
  double forward_backward(std::int64_t step, std::int64_t shard, std::int64_t shards,
                          T loss_scale = T(1), const model::GradReady& on_grad_ready = {},
                          model::UnitAccess<T>* access = nullptr);
  /// Σ g² over the optimizer ranges' gradients, replicated tensors counted
  /// only on their group's first member. The optimizer ranges of all ranks
  /// that step partition the model (each replicated element counted once),
  /// so the sum of this over them (an allreduce) is the global sum of
  /// squares; with full gradients on every rank, this rank's value already is.
  double local_sum_of_squares();
  /// Clips by the global norm √global_sum_of_squares exactly as the reference
  /// does (scale by clip/(norm + 1e-6) when norm > clip; nothing when the
  /// run's clip_norm is 0), on the optimizer ranges' gradients. Returns the
  /// norm before clipping.
  double clip(double global_sum_of_squares);
  /// One optimizer step of the optimizer ranges, as the reference steps them
  /// after data step `step` (0-based: the step forward_backward trained), then
  /// zeroes every held gradient.
  void step(std::int64_t step);
  /// The work of a forward over `range` on `batch` (with `backward`: of the
  /// forward and its backward, which does twice the forward's products). The
  /// element-wise bytes are estimated as the activations written by the
  /// forward and read and written again by the backward.
  Cost pass_cost(model::UnitRange range, const Batch& batch, bool backward);
  /// The work of clip + step over the optimizer ranges: no products; AdamW
  /// reads p, g, m, v and writes p, m, v (7 values per element), SGD 4, and
  /// the clip reads g twice.
  Cost optimizer_cost() const;
  /// Records per-layer time and FLOPs of this replica's passes (and of
  /// StagePasses made after this call) into `times`; nullptr stops.
  void set_times(model::LayerTimes* times);
  /// Our UnitAccess over this replica's own buffers (for stage passes).
  model::UnitAccess<T>& access();
  /// Where it lives and its kernels run (the host or a GPU); its ledger may be null.
  const Exec& exec() const { return exec_; }

 private:
  template <TrainElement U>
  friend class StagePass;
  struct State;
  RunSpec spec_;
  ReplicaPlan plan_;
  Exec exec_;
  std::unique_ptr<State> state_;
};

/// One forward pass kept for its backward: a pipeline stage holds one per
/// micro-batch in flight. The pass's activations are charged to the replica's
/// ledger (kActivations) from forward() until backward() or release().
template <TrainElement T>
class StagePass {
 public:
  /// A pass over `replica`'s model; `access` (nullptr: the replica's own
  /// buffers) is where parameters and gradients are found.
  explicit StagePass(Replica<T>& replica, model::UnitAccess<T>* access = nullptr);
  StagePass(StagePass&&) noexcept;
  ~StagePass();
  /// Forward of units `range` on `batch` (make_batch(spec, step, mb, m) for
  /// micro-batch mb of m), from x_in when the range does not start at unit 0.
  /// Returns the mean loss when the range ends with the loss, else 0.
  T forward(model::UnitRange range, const Batch& batch, std::span<const T> x_in = {});
  /// Backward from the loss (last stage; dx_out empty) or from dx_out, the
  /// gradient of output(); accumulates loss_scale × the gradient, reports
  /// ranges to on_grad_ready, then frees the activations. input_grad() stays
  /// valid until the next forward.
  void backward(std::span<const T> dx_out, T loss_scale,
                const model::GradReady& on_grad_ready = {});
  /// The activation this stage sends on, after forward.
  std::span<const T> output() const;
  /// The gradient this stage sends back, after backward.
  std::span<const T> input_grad() const;
  /// Drops the activations without a backward (activation checkpointing
  /// recomputes them with a second forward).
  void release();
  /// Bytes charged now for this pass's activations.
  std::int64_t charged_bytes() const;

 private:
  template <TrainElement U>
  friend class Replica;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dtw::train
