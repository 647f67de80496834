// Chapter 03's strategies for `dtw train --strategy` and `dtw bench train`,
// its demos for `dtw run` and `dtw tour`, and its pitfalls for `dtw run
// pitfall` (solution only: tools/gen-labs does not copy demos.cpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "dtw/demo.h"
#include "dtw/model/params.h"
#include "dtw/results.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "parameter_server.h"

namespace dtw::ch03 {
namespace {

using train::FormulaInput;
using train::Knobs;

PsLayout layout_of(const FormulaInput& in) {
  return ps_layout(in.ranks, in.params, ps_options(in.knobs));
}

std::int64_t largest_shard(const PsLayout& l) {
  std::int64_t m = 0;
  for (const train::Range& r : l.shards) m = std::max(m, r.size());
  return m;
}

// Bytes the busiest rank sends per step: a server sends its shard to all W
// workers (2·W·Ψ_s on its link counting the pushes it receives); a worker
// sends Ψ values and S headers of 16 bytes.
double ps_bytes(const FormulaInput& in) {
  const PsLayout l = layout_of(in);
  const double server = static_cast<double>(l.workers * largest_shard(l) * in.element_bytes);
  const double worker = static_cast<double>(in.params * in.element_bytes + 16 * l.servers);
  return std::max(server, worker);
}

// Peak bytes per category of the busiest rank (the larger total): a worker
// holds whole parameters and gradients and the activations of its rows; a
// server its shard's parameters, gradients and optimizer state, and under
// ps-ssp up to min(s + 1, steps) clock sums of its shard.
train::MemoryFigures ps_peak(const FormulaInput& in, bool ssp) {
  const PsLayout l = layout_of(in);
  const double psi = static_cast<double>(in.params * in.element_bytes);
  const double shard = static_cast<double>(largest_shard(l) * in.element_bytes);
  const bool adam = in.spec.optimizer == model::Optimizer::kAdamW;
  const std::int64_t s = ps_options(in.knobs).staleness;
  const double rows = static_cast<double>((in.spec.batch + l.workers - 1) / l.workers);
  train::MemoryFigures worker = train::no_memory_figures(), server = worker;
  const auto at = [](MemoryCategory c) { return static_cast<std::size_t>(c); };
  worker[at(MemoryCategory::kParameters)] = psi;
  worker[at(MemoryCategory::kGradients)] = psi;
  worker[at(MemoryCategory::kOptimizerState)] = 0;
  worker[at(MemoryCategory::kActivations)] = rows * in.activation_bytes_per_row;
  worker[at(MemoryCategory::kCommBuffers)] = 0;
  server[at(MemoryCategory::kParameters)] = shard;
  server[at(MemoryCategory::kGradients)] = shard;
  server[at(MemoryCategory::kOptimizerState)] = (adam ? 2 : 1) * shard;
  server[at(MemoryCategory::kActivations)] = 0;
  server[at(MemoryCategory::kCommBuffers)] =
      ssp ? static_cast<double>(std::min<std::int64_t>(s + 1, in.spec.steps)) * shard : 0;
  const auto total = [](const train::MemoryFigures& f) {
    double t = 0;
    for (double x : f) t += std::isfinite(x) ? x : 0;
    return t;
  };
  return total(worker) >= total(server) ? worker : server;
}

// What every rank of the three strategies checks at its start (ps_options,
// ps_layout) and each worker then (its rows, shard_rows), before any rank runs.
void check_ps(const train::RunSpec& spec, int ranks, const Knobs& knobs) {
  const PsOptions options = ps_options(knobs);
  const PsLayout layout = ps_layout(ranks, model::param_layout(spec.config()).size(), options);
  // A crash at a step the run never reaches would never fire: the drill "passed".
  DTW_CHECK_ARG(options.crash_step <= spec.steps,
                "ps: crash=" << knobs.get("crash", "") << ": step " << options.crash_step
                             << " is beyond the run's " << spec.steps
                             << " steps (they count from 1, as the progress line does), so the "
                                "crash would never happen");
  train::shard_rows(spec, 0, layout.workers);
}

int workers_of(int ranks, const Knobs& knobs) {
  const PsOptions o = ps_options(knobs);
  return o.workers > 0 ? o.workers : ranks - o.servers;
}

DTW_REGISTER_STRATEGY({
    .name = "ps-sync",
    .chapter = "03",
    .description = "parameter server: workers pull, compute, push; servers sum all W, step",
    .knobs = ps_knobs("ps-sync"),
    .min_ranks = 2,
    .run = [](auto& run) { ps_sync(run); },
    .bytes_formula = ps_bytes,
    .peak_formula = [](const FormulaInput& in) { return ps_peak(in, false); },
    .check = check_ps,
});

DTW_REGISTER_STRATEGY({
    .name = "ps-async",
    .chapter = "03",
    .description = "asynchronous PS: each push applied on arrival (wait_any), lr/W",
    .knobs = ps_knobs("ps-async"),
    .min_ranks = 2,
    .run = [](auto& run) { ps_async(run); },
    .bytes_formula = ps_bytes,
    .peak_formula = [](const FormulaInput& in) { return ps_peak(in, false); },
    // One worker is plain SGD on the whole batch; more apply pushes in arrival order.
    .reproduces_reference = [](int ranks,
                               const Knobs& knobs) { return workers_of(ranks, knobs) == 1; },
    .check = check_ps,
});

DTW_REGISTER_STRATEGY({
    .name = "ps-ssp",
    .chapter = "03",
    .description = "stale-synchronous PS: a step per clock, workers up to s clocks ahead",
    .knobs = ps_knobs("ps-ssp"),
    .min_ranks = 2,
    .run = [](auto& run) { ps_ssp(run); },
    .bytes_formula = ps_bytes,
    .peak_formula = [](const FormulaInput& in) { return ps_peak(in, true); },
    // Staleness 0 is the synchronous server; one worker can never be ahead.
    .reproduces_reference =
        [](int ranks, const Knobs& knobs) {
          return ps_options(knobs).staleness == 0 || workers_of(ranks, knobs) == 1;
        },
    .check = check_ps,
});

// ---- demos ---------------------------------------------------------------------

// The synchronous server on gpt-tiny in double, checked against the reference
// inside every rank: the servers report their shards, the workers nothing.
DemoCheck run_parameter_server(Comm& comm) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 3;
  spec.batch = 6;
  spec.dtype = train::DType::kFloat64;
  Knobs knobs;
  knobs.set("servers", comm.size() >= 4 ? "2" : "1");
  train::RankRun<double> run(comm, spec, knobs);
  ps_sync(run);
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c =
        train::compare_to_reference<double>(comm.rank(), spec, run.losses(), values, begin);
    if (!c.ok) return {false, c.message};
  }
  if (run.reported().empty()) return {true, "worker: pulled, computed, pushed 3 steps"};
  return {true, "server: its shard matches the reference after 3 steps"};
}

// The asynchronous server with one straggler in scripted order: every rank
// learns the largest staleness the servers saw.
DemoCheck run_ps_staleness(Comm& comm) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 8;
  Knobs knobs;
  knobs.set("straggler", "0:3").set("order", "scripted");
  train::RankRun<float> run(comm, spec, knobs);
  const PsLog log = ps_async(run);
  std::int64_t worst = 0;
  for (const PsUpdate& u : log.updates) worst = std::max(worst, u.applied - u.pulled);
  const std::vector<std::int64_t> all = allgather_results(comm, worst);
  worst = *std::max_element(all.begin(), all.end());
  const bool finite = run.losses().empty() || std::isfinite(run.losses().back());
  return {finite, "largest staleness " + std::to_string(worst) + " (worker 0 is 3x slower)"};
}

DTW_REGISTER_DEMO({.name = "parameter-server",
                   .chapter = "03",
                   .description = "synchronous PS on gpt-tiny, servers' shards checked against the reference",
                   .default_ranks = 4,
                   .min_ranks = 2,
                   .max_ranks = 8,  // its batch of 6 rows feeds at most 6 workers
                   .run = run_parameter_server});
DTW_REGISTER_DEMO({.name = "ps-staleness",
                   .chapter = "03",
                   .description = "asynchronous PS with a 3x straggler: how stale its gradients arrive",
                   .default_ranks = 4,
                   .min_ranks = 2,
                   .max_ranks = 9,  // its batch of 8 rows feeds at most 8 workers
                   .run = run_ps_staleness});

// ---- pitfalls ------------------------------------------------------------------

// SGD with momentum at 0.1, a rate ps-sync trains gpt-tiny at (and up to 0.3),
// no clipping: asynchronous with 4 workers at that same rate.
DemoCheck run_async_at_sync_lr(Comm& comm) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 60;
  spec.optimizer = model::Optimizer::kSgd;
  spec.sgd.lr = 0.1;
  spec.warmup_steps = 0;
  spec.clip_norm = 0;
  const Knobs knobs = Knobs().set("order", "scripted");
  train::RankRun<float> run(comm, spec, knobs);
  pitfalls::async_at_sync_lr(run);
  return {true, "trained without diverging (the pitfall did not trigger)"};
}

DemoCheck run_dying_worker(Comm& comm) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 6;
  const Knobs knobs;
  train::RankRun<float> run(comm, spec, knobs);
  pitfalls::dying_worker(run);
  return {true, "finished (the worker did not die)"};
}

DTW_REGISTER_DEMO({.name = "ps-async-at-sync-lr",
                   .chapter = "03",
                   .description = "async SGD at the synchronous rate: W steps per round, diverges "
                                  "(ElasticDL #89, tensorflow #14494)",
                   .default_ranks = 5,
                   .min_ranks = 4,  // with 2 workers the stale steps do not diverge in 60 steps
                   .max_ranks = 9,
                   .catches = "updates stale: diverged",
                   .run = run_async_at_sync_lr});
DTW_REGISTER_DEMO({.name = "ps-dying-worker",
                   .chapter = "03",
                   .description = "a synchronous server waiting for a worker that died "
                                  "(tensorflow #5022): an error naming it, not a hang",
                   .default_ranks = 4,
                   .min_ranks = 3,
                   .max_ranks = 9,
                   .catches = "worker 1 (rank 2) crashed before its push of step 3",
                   .run = run_dying_worker});

}  // namespace
}  // namespace dtw::ch03
