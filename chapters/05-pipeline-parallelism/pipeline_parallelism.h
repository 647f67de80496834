#pragma once
/// @file
/// Chapter 05 — pipeline parallelism: the contract the lab fills in.
///
/// The model's units (embedding, blocks, head; or an MLP's layers) are cut
/// into contiguous *chunks*; chunk c runs on rank c mod p, so with one chunk
/// per rank (v = 1) chunk s is stage s, and with v > 1 every rank holds v
/// chunks that are p apart (interleaving). Every step, the global batch is cut
/// into m micro-batches; a *schedule* says, for every rank, in which order it
/// runs the forward and backward of each (chunk, micro-batch) and the messages
/// around them. The schedule is plain data, so it can be printed, checked
/// before anything runs, and executed by one executor for every kind.
///
/// Messages: the activation of (chunk c, micro-batch mb) goes from chunk c's
/// rank to chunk c+1's with tag pipe_tag(kActivation, c, mb); its gradient
/// comes back from chunk c+1's rank with tag pipe_tag(kGradient, c+1, mb).
/// Per step and chunk boundary that is m activations and m gradients of
/// (rows of the micro-batch) × (width of the boundary) values each.
///
/// Bad input (more chunks than units, m < 1, a batch smaller than m, a
/// schedule that names a micro-batch or chunk that does not exist, or whose
/// messages cannot pair) raises dtw::InvalidArgument naming the rank and the
/// values, before any message moves.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/comm.h"
#include "dtw/trace.h"
#include "dtw/model/units.h"
#include "dtw/train/micro_batches.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"
#include "schedule.h"  // steps 05.2, 05.4 and 05.6: a schedule is data

namespace dtw::ch05 {

// ---- step 05.1: the stage split ---------------------------------------------

/// How the model is cut into chunks.
enum class Balance {
  kParams,  ///< equal parameters per chunk, as far as whole units allow
  kTime,    ///< equal forward + backward time per chunk, measured on rank 0
  kBlocks,  ///< equal blocks per chunk (Megatron's): needs blocks % (p·v) = 0
  kFlops,   ///< equal matrix-product work per chunk, counted (dtw train's default)
};
/// "params", "time", "blocks" or "flops".
const char* name_of(Balance balance);
/// Parses a name of name_of; InvalidArgument naming the value otherwise.
Balance balance_from_name(std::string_view name);

/// The cost of every unit of `spec`'s model, in forward order: its parameter
/// count (kParams), its forward's floating-point operations on micro-batch 0
/// of `micro_batches` (kFlops: the backward does twice as many, so the
/// forward's count ranks the units as the whole pass does), or the seconds one forward and backward of it take on
/// micro-batch 0 of `micro_batches` (kTime), measured by rank 0 and broadcast
/// so that every rank cuts the model the same way (ranks that measured for
/// themselves could disagree, and then their messages would not pair).
/// Collective over `comm` for kTime (kParams and kFlops take nullptr). InvalidArgument
/// for kBlocks (it has no costs) and for kTime without a communicator.
std::vector<double> unit_costs(const train::RunSpec& spec, Balance balance, int micro_batches,
                               Comm* comm);

/// Step 05.1: cuts `costs.size()` units into `chunks` contiguous, non-empty
/// runs, in order, so that the most expensive run costs as little as
/// possible; among equally good cuts, earlier runs take as many units as
/// they can. Costs must be finite and ≥ 0. InvalidArgument when chunks < 1
/// or chunks > costs.size(), naming both.
std::vector<model::UnitRange> split_units(std::span<const double> costs, int chunks);

/// Which rank runs which chunk.
struct StageMap {
  int ranks = 1;           ///< p
  int virtual_stages = 1;  ///< v: chunks per rank
  std::vector<model::UnitRange> chunks;  ///< p·v unit ranges in forward order
  /// p·v.
  int chunk_count() const { return static_cast<int>(chunks.size()); }
  /// The rank that runs chunk c: c mod p.
  int rank_of(int chunk) const { return chunk % ranks; }
  /// Rank r's chunks in forward order: r, r + p, …, r + (v−1)p.
  std::vector<int> chunks_of(int rank) const;
  /// "[embed h.0] [h.1 head]" with `units`' names.
  std::string describe(const std::vector<model::Unit>& units) const;
};

/// Cuts `spec`'s model into p·v chunks by `balance` (micro_batches sizes
/// kTime's probe). Collective over `comm` for kTime (which needs it; the
/// others take nullptr). InvalidArgument, naming the model and the numbers,
/// for p or v < 1, p·v larger than the model's units, or (kBlocks) blocks
/// not divisible by p·v.
StageMap make_stage_map(const train::RunSpec& spec, Balance balance, int ranks,
                        int virtual_stages, int micro_batches, Comm* comm);
/// The InvalidArgument checks of make_stage_map, which calls it first: no
/// communicator and no measurement, so it also runs before any rank does.
void check_stage_map(const train::RunSpec& spec, Balance balance, int ranks, int virtual_stages);

/// Step 05.1: what `rank` holds: the units of its chunks (parameters,
/// gradients and optimizer state), and, when the GPT's head is tied to the
/// embedding (`tied_wte_end` > 0: wte is [0, tied_wte_end)) and the rank runs
/// the head but not the embedding, a copy of wte's parameters and gradients
/// without optimizer state (the embedding's rank steps wte and sends it back).
train::ReplicaPlan stage_plan(const StageMap& map, const std::vector<model::Unit>& units,
                              std::int64_t tied_wte_end, int rank);

// ---- steps 05.3 and 05.5: the executor ---------------------------------------

/// How the executor runs a schedule.
struct ExecutorOptions {
  /// Step 05.5: keep only each micro-batch's input after its forward and
  /// recompute the chunk's activations before its backward.
  bool checkpoint = false;
  /// Sends block until received (the chapter's pitfall); by default a send is
  /// posted (isend) and the rank moves on.
  bool blocking_sends = false;
};

/// What the end of a pipeline step is handed, once the last backward is done
/// and the tied embedding's two shares of wte's gradient are summed on the
/// embedding's rank (before the stepped wte goes back to the head's copy).
template <TrainElement T>
struct StepEnd {
  train::RankRun<T>& run;      ///< the rank's run (its phases)
  Comm& comm;                  ///< the pipeline's communicator: the executor's
  train::Replica<T>& replica;  ///< this rank's chunks, holding the step's gradient
  std::int64_t step = 0;       ///< the data step
  /// Σ weight × loss over the micro-batches whose last chunk ran here (0 on
  /// the other ranks): this pipeline's share of the global mean loss.
  double loss = 0;
};

/// The end of a step: reduce what must be reduced, clip, step; returns the
/// step's global mean loss, known on every rank of the pipeline.
template <TrainElement T>
using EndOfStep = std::function<double(const StepEnd<T>&)>;

/// Step 05.3: the end of a step of a pipeline that is the whole run (the
/// default EndOfStep): one allreduce over end.comm of {Σ g² of this rank's
/// optimizer ranges, end.loss} gives the global clipping norm and the loss;
/// clip and step inside an "optimizer" phase. Returns the loss.
template <TrainElement T>
double clip_and_step(const StepEnd<T>& end);

/// Where a step's micro-batches come from: micro-batch `mb` of `m` of data
/// step `step`. Its rows and its weight (its share of the global batch) are
/// what the executor forwards and weighs the backward with.
using MicroBatchSource = std::function<train::Batch(std::int64_t step, int mb, int m)>;

/// What a composed run (chapter 08: data-parallel replicas of a pipeline)
/// changes in the executor. Empty members keep chapter 05's behaviour.
template <TrainElement T>
struct ExecutorHooks {
  /// Null: the whole batch cut into m, train::micro_batch(spec, step, 0, 1,
  /// mb, m). A data-parallel replica r of dp gives train::micro_batch(spec,
  /// step, r, dp, mb, m): its m of the dp·m shards.
  MicroBatchSource micro_batches;
  /// Null: clip_and_step. A replica of dp allreduces the gradients over its
  /// data-parallel group first (then the norm over the pipeline, and the
  /// loss over both).
  EndOfStep<T> end_of_step;
};

/// Runs one rank's list of a schedule, step after step, on a Replica that
/// holds this rank's chunks (stage_plan). Every forward and backward is a
/// timeline phase with its chunk (as the stage) and micro-batch.
template <TrainElement T>
class Executor {
 public:
  /// For `run`'s rank, whose state is `replica`, cut by `map`: a pipeline
  /// over the run's whole world, with the default hooks.
  Executor(train::RankRun<T>& run, train::Replica<T>& replica, const StageMap& map,
           ExecutorOptions options);
  /// The same on `comm`, the pipeline's own communicator (a Grid's
  /// group("pp") in a composed run; map.ranks must be comm.size(), and the
  /// schedule's ranks are comm's ranks), with `hooks`' micro-batches and end
  /// of step. No message of the executor leaves `comm`.
  Executor(train::RankRun<T>& run, Comm& comm, train::Replica<T>& replica, const StageMap& map,
           ExecutorOptions options, ExecutorHooks<T> hooks = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Step 05.3: runs `actions` for data step `step` cut into `m`
  /// micro-batches (micro-batch mb from the hooks' source: by default
  /// make_batch(spec, step, mb, m)), then the end of the step: wte's two
  /// shares summed on its owner, the hooks' end of step (by default
  /// clip_and_step: the global gradient norm by allreduce, clip, step), wte
  /// sent back. Returns the step's global mean loss, known on every rank.
  /// InvalidArgument naming the rank and the action for an action on a chunk
  /// this rank does not run or a micro-batch outside [0, m), and, checked by
  /// the given part as the actions run, for a break of the rule that a
  /// buffer a posted send reads outlives the send: a pass that goes back to
  /// the pool or comes out of it while a send not yet waited for reads it
  /// ("rank r, in A: a pass went back to|taken from the pool while send grad
  /// … still reads its memory"), or a backward that starts while its own
  /// (chunk, micro-batch)'s activation send is in flight ("rank r, in B…:
  /// the backward starts while send act … is still in flight").
  double step(std::span<const Action> actions, std::int64_t step, int m);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- the strategies ------------------------------------------------------------

/// Settings of a pipeline run, from the strategy's knobs.
struct PipelineSettings {
  ScheduleKind kind = ScheduleKind::kOneFOneB;  ///< the schedule
  int micro_batches = 1;                        ///< m (knob micro_batches)
  int virtual_stages = 1;                       ///< v (knob virtual_stages, interleaved only)
  Balance balance = Balance::kFlops;            ///< the split (knob balance=flops|params|time|blocks)
  ExecutorOptions executor;                     ///< knobs checkpoint=0|1, sends=async|blocking
  bool check = true;                            ///< check_schedule first (knob check=0|1)
};
/// Reads the knobs of `kind`'s strategy: micro_batches (default 1 for naive,
/// else 2p, at most the batch), virtual_stages (default 2; interleaved only),
/// balance, checkpoint, sends, check. InvalidArgument naming the knob and the
/// value for m < 1, v < 1, a batch smaller than m, or an unknown value.
PipelineSettings pipeline_settings(const train::Knobs& knobs, ScheduleKind kind,
                                   const train::RunSpec& spec, int ranks);
/// The knobs `kind`'s strategy declares (train::Strategy::knobs), those
/// pipeline_settings reads: virtual_stages only for the interleaved schedule.
std::vector<train::Knob> pipeline_knobs(ScheduleKind kind);

/// Trains run.spec() with `schedule` (made for this world) and `settings`:
/// splits the model, checks the schedule (unless settings.check is false),
/// builds this rank's Replica and Executor, records each step's loss on every
/// rank and reports the parameters this rank owns.
template <TrainElement T>
void train_pipeline(train::RankRun<T>& run, const Schedule& schedule,
                    const PipelineSettings& settings);

/// What the strategies refuse at their start, checked before any rank runs
/// (their registrations' train::Strategy::check): pipeline_settings, then
/// check_stage_map with the settings' balance and v on `ranks` ranks.
void check_pipeline_run(const train::Knobs& knobs, ScheduleKind kind, const train::RunSpec& spec,
                        int ranks);

/// The registered strategies: pipeline_settings(run.knobs(), kind, …), then
/// train_pipeline with make_schedule(kind, p, m, v).
template <TrainElement T>
void pp_naive(train::RankRun<T>& run);
/// GPipe (see pp_naive).
template <TrainElement T>
void pp_gpipe(train::RankRun<T>& run);
/// 1F1B (see pp_naive).
template <TrainElement T>
void pp_1f1b(train::RankRun<T>& run);
/// Interleaved 1F1B (see pp_naive).
template <TrainElement T>
void pp_interleaved(train::RankRun<T>& run);

/// The activation bytes `rank` holds at its worst moment when it runs its
/// list of `schedule` on `map` (micro-batch mb: make_batch(spec, 0, mb, m)),
/// read off the list itself: without checkpointing, the sum of
/// activation_bytes over the (chunk, micro-batch) pairs forwarded and not yet
/// backwarded; with it, the saved inputs received so far (chunk 0 saves
/// nothing: its input is the batch) plus the one chunk being computed. What
/// the memory ledger's kActivations peak must equal.
template <TrainElement T>
std::int64_t activation_peak(const Schedule& schedule, const StageMap& map,
                             const train::RunSpec& spec, int rank, bool checkpoint);

// ---- step 05.7: the bubble, measured ------------------------------------------

/// Step 05.7: the bubble of a pipeline run, read off its timeline `events`
/// (a trace, or its replay on a modeled fabric) for `ranks` stages: the share
/// of rank-time not spent computing, 1 − Σ compute / (ranks · span), where
/// the compute is the pipeline's own phases (category "compute" with a stage
/// ≥ 0: forwards, backwards, recomputes; not the optimizer's step, which
/// names no stage) and the span runs from the first such phase's start on
/// any rank to the last one's end. Events in any order; every other event is
/// ignored. InvalidArgument, in these words: `ranks` < 1, "pipeline_bubble: R
/// ranks (at least 1)"; a pipeline phase of a rank outside [0, ranks),
/// "pipeline_bubble: a <name> phase of rank R, outside [0, P)"; no pipeline
/// phase at all, "pipeline_bubble: no compute phase of a pipeline stage
/// among N events".
double pipeline_bubble(const std::vector<TraceEvent>& events, int ranks);

}  // namespace dtw::ch05
