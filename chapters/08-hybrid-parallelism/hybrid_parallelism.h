#pragma once
/// @file
/// Chapter 08 — hybrid parallelism: the contract the lab fills in.
///
/// p ranks are laid out as a grid pp × dp × tp (outermost first): pp
/// pipeline stages (chapter 05), each stage tensor-parallel over tp ranks
/// (chapter 06), the whole pipeline replicated dp times over the batch
/// (chapter 02's data parallelism, or chapter 04's ZeRO-1 on the dp group).
/// World rank = (stage · dp + replica) · tp + slice: tp innermost, so the
/// ranks that talk the most are neighbours (one node), pp outermost.
///
/// A rank belongs to three groups, one per axis, and each collective of a
/// step runs on exactly one of them (or on a product of them):
///
///     axis  group                   what crosses it, per step
///     tp    the t ranks of a stage  Megatron's allreduces (chapter 06's seams)
///     pp    one rank per stage      activations and their gradients, the tied wte
///     dp    one rank per replica    the gradients of the rank's slice of its stage
///
/// Every function here is collective over the groups it names; every rank
/// of the world calls them with the same layout. Bad input (axes that do not
/// multiply to the world, tp not dividing the heads or hidden units, more
/// stages than the model has units, a batch smaller than dp · m) raises
/// dtw::InvalidArgument naming the rank and the values, before any message.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/train/fabric.h"
#include "dtw/train/grid.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"
#include "pipeline_parallelism.h"  // chapter 05: StageMap, Executor, StepEnd
#include "tensor_parallel.h"       // chapter 06: megatron_shard, MegatronSeams

namespace dtw::ch08 {

/// One layout of the world: the three axis sizes, the micro-batches each
/// pipeline cuts its share of the batch into, and how the dp group keeps the
/// optimizer state.
struct Layout {
  int pp = 1;              ///< pipeline stages
  int dp = 1;              ///< data-parallel replicas of the pipeline
  int tp = 1;              ///< tensor-parallel ranks per stage
  int micro_batches = 1;   ///< m, per replica and step (1F1B across the stages)
  bool zero1 = false;      ///< ZeRO-1 on the dp group: each replica steps 1/dp of its state
  /// pp · dp · tp.
  int ranks() const { return pp * dp * tp; }
  /// "pp 2 × dp 2 × tp 2, m 4" (", ZeRO-1" when zero1).
  std::string describe() const;
};

/// The layout the strategy's knobs give (pp, dp, tp, micro_batches,
/// zero1=0|1) on `ranks` ranks: an axis left out takes what the others leave
/// (dp by default: ranks / (pp · tp)); micro_batches defaults to 2·pp (at
/// most the replica's rows). InvalidArgument naming the knob and the value
/// for a value below 1 or an unknown zero1 value. Does not check the layout
/// against the model (check_layout does).
Layout layout_from_knobs(const train::Knobs& knobs, const train::RunSpec& spec, int ranks);
/// The knobs `hybrid` declares (train::Strategy::knobs).
std::vector<train::Knob> hybrid_knobs();

// ---- step 08.1: the grid and its groups -------------------------------------------

/// Step 08.1: refuses a layout that cannot run `spec` on `ranks` ranks, on
/// every rank the same way and before any message, with an InvalidArgument
/// whose message starts with "rank R: " (`rank` ≥ 0; −1 before any rank
/// runs: no prefix) and then, for the first thing wrong, in this order:
///   pp · dp · tp ≠ ranks:     "pp 2 × dp 2 × tp 3 is 12 ranks, not 8"
///   tp > 1 on a model that is not a GPT:
///                             "tp 2 needs a GPT to cut; mlp-tiny is not one"
///   tp not dividing the heads or hidden units: chapter 06's megatron_shard
///                             message ("rank 0: 4 heads do not split over t = 3 ranks ...")
///   more stages than units:   "pp 5 stages, but gpt-tiny has only 4 units to cut"
///   batch < dp · m:           "a batch of 8 rows cannot feed dp 4 × m 3 micro-batches"
/// A layout that can run passes on every rank (any `rank` in [−1, ranks)).
void check_layout(const train::RunSpec& spec, const Layout& layout, int ranks, int rank);

/// The communicators of one rank of a hybrid run (references into a Grid,
/// which must outlive them).
struct Groups {
  Comm* pp = nullptr;     ///< the pp ranks of this rank's replica and slice: its pipeline
  Comm* dp = nullptr;     ///< the dp ranks of this rank's stage and slice: its replicas
  Comm* tp = nullptr;     ///< the tp ranks of this rank's stage and replica: its slices
  Comm* world = nullptr;  ///< every rank, in the grid's order
};

/// Step 08.1: the grid of `layout` over `world`, axes named "pp", "dp" and
/// "tp", outermost first (tp innermost: its ranks are neighbours). Collective
/// over `world`: every rank makes every group in the same order (the Grid
/// does; a rank that made its groups in another order would wait in a split
/// no other rank is in). The caller has run check_layout.
train::Grid make_grid(Comm& world, const Layout& layout);
/// Step 08.1: this rank's groups in `grid` (see Groups: which axis each
/// spans).
Groups groups_of(const train::Grid& grid);

// ---- step 08.2: what a rank holds --------------------------------------------------

/// Where a rank sits: its coordinate on each axis.
struct Coords {
  int stage = 0;    ///< pp coordinate
  int replica = 0;  ///< dp coordinate
  int slice = 0;    ///< tp coordinate
};

/// Step 08.2: what the rank at `at` holds: the units of its stage (`map`:
/// chapter 05's cut of the model's units, the same on every slice and
/// replica), taken from its tensor-parallel shard of the model
/// (megatron_shard(config, slice, tp): its heads, hidden units and
/// vocabulary rows; a model that is not a GPT is never cut: its whole
/// layout, model::param_layout(config), and a whole shard), with the head's
/// copy of the tied wte when its stage runs the head but not the embedding
/// (chapter 05's stage_plan on the shard's units); the tensors the shard
/// does not cut held replicated over the tp group
/// (train::Replication::uncut). With ZeRO-1 (layout.zero1) the optimizer
/// ranges are cut over the dp group: of each optimizer range of the plan
/// above, this replica keeps chunk `replica` of Chunks(range size, dp)
/// (empty chunks left out); parameters and gradients stay whole.
train::ReplicaPlan hybrid_plan(const train::RunSpec& spec, const Layout& layout,
                               const ch05::StageMap& map, Coords at);

// ---- step 08.3: the end of a step ---------------------------------------------------

/// Step 08.3: the end of a hybrid step, chapter 05's ExecutorHooks::end_of_step
/// (the tied wte's two shares are already summed on the embedding's stage).
/// Every rank holds the gradient of its micro-batches (each weighted by its
/// rows / the global batch) for its stage's slice. Without ZeRO-1: allreduce
/// the gradients over the dp group; with it, reduce-scatter each optimizer
/// range's gradient over the dp group into this replica's chunk. Then one
/// allreduce over the world of {Σ g², loss} in which each term counts once:
/// Σ g² (Replica::local_sum_of_squares) on replica 0 only, or on every
/// replica under ZeRO-1 (each holds its own chunk); the loss (end.loss,
/// known on the last stage, the same on each of its tp ranks) on slice 0.
/// Clip, step; with ZeRO-1 allgather each range's parameters over the dp
/// group. `stepped` are the ranges this stage's replicas step together: the
/// plan's optimizer ranges before ZeRO-1 cut them (hybrid_plan without
/// zero1), which ZeRO-1's chunks are chunks of; the head's copy of wte is
/// not one of them. Returns the global mean loss, the same on every rank.
template <TrainElement T>
double hybrid_end_of_step(const Groups& groups, const Layout& layout,
                          std::span<const train::Range> stepped, const ch05::StepEnd<T>& end);

// ---- step 08.4: the composed run ----------------------------------------------------

/// Step 08.4: trains run.spec() with `layout` (checked first): the grid and
/// its groups; chapter 05's stage map of the whole model (Balance::kParams,
/// the same cut on every rank); this rank's Replica (hybrid_plan) with
/// chapter 06's MegatronSeams on its tp group; chapter 05's Executor on its
/// pp group running 1F1B with m micro-batches, which come from the training
/// layer's rule for replica `replica` of dp (train::micro_batch), ending
/// every step with hybrid_end_of_step. Only a GPT has seams (an MLP is
/// never cut: tp is 1). Records every step's loss on every rank and reports
/// every parameter this rank holds (run.report(replica): the head's copy of
/// wte and each replica's copy too; the comparison checks them all).
template <TrainElement T>
void train_hybrid(train::RankRun<T>& run, const Layout& layout);

/// `hybrid`: layout_from_knobs(run.knobs(), …), then train_hybrid.
template <TrainElement T>
void hybrid(train::RankRun<T>& run);

// ---- step 08.5: choosing a layout -----------------------------------------------------

/// What one layout costs, by the chapters' formulas, on a modeled cluster.
struct Prediction {
  Layout layout;
  double compute_s = 0;   ///< the busiest stage's forward + backward time per micro-batch × m
  double bubble_s = 0;    ///< 1F1B's idle time: (pp − 1) × one micro-batch's stage time
  double tp_s = 0;        ///< Megatron's allreduces per step, on the tp group's link
  double pp_s = 0;        ///< activations and gradients between stages, per step
  double dp_s = 0;        ///< the gradient allreduce (or reduce-scatter + allgather)
  double optimizer_s = 0; ///< the {Σ g², loss} allreduce over the world, clip and step
  double step_s = 0;      ///< the predicted step time: the sum of the above
  /// Peak bytes per memory category on the busiest rank (MemoryCategory
  /// order; kCommBuffers and kOther 0): parameters, gradients and optimizer
  /// state of its plan, and its activations at 1F1B's worst moment.
  train::MemoryFigures memory{};
  double memory_total = 0;  ///< Σ memory
  std::string note;         ///< why it ranks where it does ("bubble 43%", "tp across nodes")
};

/// The bytes per memory category rank `at` of `layout` holds at its peak
/// (spec.dtype's element size): its plan's parameters, gradients and
/// optimizer state (hybrid_plan), and the activations 1F1B holds on its
/// stage at its worst moment (the schedule walked on its shard's network with
/// its replica's micro-batches). What its ledger's peaks must equal.
train::MemoryFigures rank_memory(const train::RunSpec& spec, const Layout& layout, Coords at);

/// Step 08.5: the prediction for `layout` training `spec` on `cluster`, by
/// the chapter text's cost model: compute from the stage's forward FLOPs
/// (×3 for forward and backward) over cluster.flops plus 3 × the bytes its
/// forward keeps (Network::activation_bytes, in the run's element type)
/// over cluster.memory_bw
/// (its ranks_per_node decides which links each axis crosses: tp's group is
/// consecutive ranks, dp's and pp's are tp (and tp·dp) apart).
Prediction predict(const train::RunSpec& spec, const Layout& layout, const train::Cluster& cluster);

/// Every valid layout of `spec` on `ranks` ranks (check_layout passes), with
/// m in `micro_batches` (empty: 2·pp only), with and without ZeRO-1.
std::vector<Layout> valid_layouts(const train::RunSpec& spec, int ranks,
                                  const std::vector<int>& micro_batches, bool with_zero1);

/// `dtw plan`: predict every valid layout, drop those whose memory_total is
/// over `memory_cap` bytes (0: no cap), best (smallest step_s) first.
std::vector<Prediction> plan(const train::RunSpec& spec, int ranks, const train::Cluster& cluster,
                             double memory_cap, const std::vector<int>& micro_batches);

}  // namespace dtw::ch08
