// Chapter 02's strategies for `dtw train --strategy` and `dtw bench train`
// (with the formulas the benchmark prints beside its measurements), its demos
// for `dtw run` and `dtw tour`, and its pitfalls for `dtw run pitfall`.
// Solution only: tools/gen-labs does not copy demos.cpp.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "data_parallelism.h"
#include "dtw/demo.h"
#include "dtw/train/network.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"

namespace dtw::ch02 {
namespace {

using train::FormulaInput;
using train::MemoryFigures;

// ---- formulas (bytes the busiest rank sends per step; its memory) ---------------

double model_bytes(const FormulaInput& in) {
  return static_cast<double>(in.params * in.element_bytes);
}

// The server sends θ to p−1 workers; a worker sends its gradient and 8 bytes of loss.
double server_bytes(const FormulaInput& in) {
  const double p = in.ranks;
  return in.ranks == 1 ? 0.0 : std::max((p - 1) * model_bytes(in), model_bytes(in) + 8);
}

// The ring: 2(p−1) chunks of n/p per allreduce, for the gradients and the
// loss; plus rank 0's share of the broadcast at the start (a binomial tree's
// root sends to ⌈lg p⌉ children), spread over the run's steps.
double ring_bytes(const FormulaInput& in) {
  const double p = in.ranks;
  const double broadcast = std::ceil(std::log2(p)) * model_bytes(in);
  return 2 * (p - 1) / p * (model_bytes(in) + 8) +
         broadcast / static_cast<double>(std::max<std::int64_t>(in.spec.steps, 1));
}

// The activations one pass over shard `shard` of `shards` keeps for its backward, as the
// model counts them (what Replica charges to the ledger).
template <class T>
double activation_bytes(const train::RunSpec& spec, std::int64_t shard, std::int64_t shards) {
  const auto net = train::Network<T>::make(spec.config());
  return static_cast<double>(
      net->activation_bytes(net->all(), train::make_batch(spec, 0, shard, shards)));
}

// Rank 0's peak: parameters, gradients, AdamW's two moments (SGD: one) and the
// activations of its rows (of one micro-batch with accumulation: that is the
// memory accumulation saves); buckets are views of the gradients, so no
// communication buffers. The server variant is rank 0's, the server.
MemoryFigures peak_with(const FormulaInput& in, std::int64_t micro_batches) {
  MemoryFigures f = train::no_memory_figures();
  const double psi = model_bytes(in);
  const bool adam = in.spec.optimizer == model::Optimizer::kAdamW;
  const std::int64_t shards = in.ranks * micro_batches;
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = adam ? 2 * psi : psi;
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] =
      shards > in.spec.batch  ? std::nan("")
      : in.element_bytes == 8 ? activation_bytes<double>(in.spec, 0, shards)
                              : activation_bytes<float>(in.spec, 0, shards);
  f[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = 0;
  return f;
}
MemoryFigures replica_peak(const FormulaInput& in) {
  return peak_with(in, 1);
}
MemoryFigures accumulate_peak(const FormulaInput& in) {
  return peak_with(in, in.knobs.get_int("micro_batches", DdpOptions{}.micro_batches));
}

DTW_REGISTER_STRATEGY(
    {.name = "dp-server",
     .chapter = "02",
     .description = "DP 1.0: rank 0 sums the gradients, steps, sends parameters back",
     .min_ranks = 1,
     .run = [](auto& run) { dp_server(run); },
     .bytes_formula = server_bytes,
     .peak_formula = replica_peak,
     .bubble_formula = nullptr,
     // Its one check: shard_weight's (a row for every rank); it reads no knobs.
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs&) { train::shard_rows(spec, 0, ranks); }});
DTW_REGISTER_STRATEGY(
    {.name = "dp-allreduce",
     .chapter = "02",
     .description = "DP 1.1: replicas, one ring allreduce of the gradients after backward",
     .knobs = ddp_knobs(false, false),
     .min_ranks = 1,
     .run = [](auto& run) { dp_allreduce(run); },
     .bytes_formula = ring_bytes,
     .peak_formula = replica_peak,
     .bubble_formula = nullptr,
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs& knobs) { check_ddp_run(knobs, spec, ranks, -1, false); }});
DTW_REGISTER_STRATEGY(
    {.name = "ddp-bucketed",
     .chapter = "02",
     .description = "DDP: bucket allreduces overlapped with backward",
     .knobs = ddp_knobs(true, false),
     .min_ranks = 1,
     .run = [](auto& run) { ddp_bucketed(run); },
     .bytes_formula = ring_bytes,
     .peak_formula = replica_peak,
     .bubble_formula = nullptr,
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs& knobs) { check_ddp_run(knobs, spec, ranks, -1, false); }});
DTW_REGISTER_STRATEGY(
    {.name = "ddp-accumulate",
     .chapter = "02",
     .description =
         "DDP + gradient accumulation: sync on the last of m micro-batches",
     .knobs = ddp_knobs(true, true),
     .min_ranks = 1,
     .run = [](auto& run) { ddp_accumulate(run); },
     .bytes_formula = ring_bytes,
     .peak_formula = accumulate_peak,
     .bubble_formula = nullptr,
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs& knobs) { check_ddp_run(knobs, spec, ranks, -1, true); }});

// ---- demos: a strategy on gpt-tiny, checked against the reference --------------

// A short run in double, so "equal to the reference" can be demanded to 1e-9.
train::RunSpec demo_run(std::int64_t batch) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 4;
  spec.batch = batch;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

using Strategy64 = std::function<void(train::RankRun<double>&)>;

// Runs `strategy` on this rank and compares what it reported with the
// reference; a mismatch is returned (or, for a pitfall, thrown) with the
// first divergent element.
DemoCheck train_and_compare(Comm& comm, const train::RunSpec& spec, const train::Knobs& knobs,
                            const Strategy64& strategy, bool throw_on_mismatch) {
  train::RankRun<double> run(comm, spec, knobs);
  strategy(run);
  double max_diff = 0;
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        comm.rank(), spec, run.losses(), values, begin, train::kDoubleTolerance, spec.steps);
    if (!c.ok) {
      DTW_CHECK_ARG(!throw_on_mismatch, "the model differs from the reference: " << c.message);
      return {false, c.message, 0};
    }
    max_diff = std::max(max_diff, c.max_abs_diff);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "gpt-tiny, %lld steps, batch %lld on %d ranks: equal to the reference "
                "(max |dθ| %.1e)",
                static_cast<long long>(spec.steps), static_cast<long long>(spec.batch), comm.size(),
                max_diff);
  return {true, detail, 0};
}

void register_training_demo(const char* name, const char* description, Strategy64 strategy,
                            train::Knobs knobs = {}) {
  // Every data shard needs a row of each micro-batch: 12 rows feed 12 ranks, or 4 at m = 3.
  const int micro_batches = static_cast<int>(knobs.get_int("micro_batches", 1));
  register_demo({.name = name,
                 .chapter = "02",
                 .description = description,
                 .default_ranks = 4,
                 .min_ranks = 1,
                 .max_ranks = 12 / micro_batches,
                 .expects_deadlock = false,
                 .catches = "",
                 .run = [strategy, knobs](Comm& comm) {
                   return train_and_compare(comm, demo_run(12), knobs, strategy, false);
                 }});
}

// `max_ranks`: the largest world in which the bug still shows (a row of every
// micro-batch for each rank, and for some bugs more).
void register_pitfall(const char* name, const char* description, const char* catches,
                      Strategy64 strategy, std::int64_t batch, int ranks, int max_ranks,
                      train::Knobs knobs = {}) {
  register_demo({.name = name,
                 .chapter = "02",
                 .description = description,
                 .default_ranks = ranks,
                 .min_ranks = 2,
                 .max_ranks = max_ranks,
                 .expects_deadlock = false,
                 .catches = catches,
                 .run = [strategy, knobs, batch](Comm& comm) {
                   return train_and_compare(comm, demo_run(batch), knobs, strategy, true);
                 }});
}

const bool kRegistered = [] {
  register_training_demo("dp-server",
                         "DP 1.0 on gpt-tiny: the traffic table shows the server's hot link",
                         [](auto& run) { dp_server(run); });
  register_training_demo("dp-allreduce", "DP 1.1 on gpt-tiny: ring allreduce, replicas checked",
                         [](auto& run) { dp_allreduce(run); });
  register_training_demo(
      "ddp-bucketed", "DDP on gpt-tiny: 64 KiB buckets during backward",
      [](auto& run) { ddp_bucketed(run); }, train::Knobs().set("bucket_kib", "64"));
  register_training_demo(
      "ddp-accumulate", "DDP on gpt-tiny, 3 micro-batches per step, one sync",
      [](auto& run) { ddp_accumulate(run); }, train::Knobs().set("micro_batches", "3"));
  register_pitfall(
      "accumulate-sync-first",
      "syncs micro-batch 0, not the last (modelscope/FunASR#3472): ranks diverge",
      "replicas diverged", [](auto& run) { pitfalls::sync_on_first_micro_batch(run); }, 8, 2, 4,
      train::Knobs().set("micro_batches", "2"));
  register_pitfall(
      "accumulate-sync-flag-late",
      "sync flag set after the forward (karpathy/build-nanogpt#30): ranks diverge",
      "replicas diverged", [](auto& run) { pitfalls::sync_flag_set_after_forward(run); }, 8, 2, 4,
      train::Knobs().set("micro_batches", "2"));
  register_pitfall(
      "skip-initial-broadcast",
      "each rank draws its own weights, no broadcast from rank 0: caught at the start",
      "replicas diverged at the start", [](auto& run) { pitfalls::skip_initial_broadcast(run); }, 8,
      2, 8);
  register_pitfall(
      "average-by-world-size",
      "1/p average of 13 rows on 3 ranks (PyTorch DDP's rule): replicas agree, all wrong",
      "differs from the reference", [](auto& run) { pitfalls::average_by_world_size(run); }, 13, 3,
      12);  // 13 rows on 13 ranks split evenly, and 1/p is then right
  return true;
}();

}  // namespace
}  // namespace dtw::ch02
