// Chapter 04's strategies (dtw train --strategy, dtw bench train) with their
// formulas, its demo for dtw tour, and its pitfalls (dtw run pitfall NAME).
// Solution only: tools/gen-labs does not copy this file.
#include <algorithm>
#include <cmath>
#include <string>

#include "dtw/demo.h"
#include "dtw/model/params.h"
#include "dtw/train/reference.h"
#include "zero.h"
#include "zero_run.h"

namespace dtw::ch04 {
namespace {

using train::FormulaInput;
using train::MemoryFigures;

// How often ZeRO-3 gathers each unit per forward + backward pass: the
// forward once, the backward again, except the GPT embedding, whose backward
// needs only its gradient; a tied head borrows the embedding in both passes.
std::vector<int> gathers_per_pass(const model::ModelConfig& c, std::size_t units) {
  std::vector<int> g(units, 2);
  if (c.kind == model::ModelKind::kGpt) g[0] = model::head_is_tied(c) ? 3 : 1;
  return g;
}

// Values rank r sends per step. Chapter 01's ring reduce-scatter sends every
// chunk of a unit but rank r's own, its allgather every chunk but rank r+1's;
// the end of the step is a ring allreduce of two doubles (loss, Σ g²).
double bytes_sent(const FormulaInput& in, int stage, int r) {
  const Sharding s = Sharding::of(in.spec, in.ranks);
  const double m = static_cast<double>(in.knobs.get_int("micro_batches", 1));
  const std::vector<int> g = gathers_per_pass(in.spec.config(), s.units().size());
  double values = 0;
  for (int u = 0; u < static_cast<int>(s.units().size()); ++u) {
    const Chunks c = s.chunks(u);
    const double rs = static_cast<double>(c.total() - c.size(r));
    const double ag = static_cast<double>(c.total() - c.size(r + 1));
    if (stage == 1) values += rs + ag;      // once per step, after the last micro-batch
    if (stage == 2) values += m * rs + ag;  // a reduce-scatter per micro-batch
    if (stage == 3) values += m * (rs + g[static_cast<std::size_t>(u)] * ag);
  }
  const Chunks two(2, in.ranks);
  return values * static_cast<double>(in.element_bytes) +
         8.0 * static_cast<double>(4 - two.size(r) - two.size(r + 1));
}

double busiest_bytes(const FormulaInput& in, int stage) {
  double most = 0;
  for (int r = 0; r < in.ranks; ++r) most = std::max(most, bytes_sent(in, stage, r));
  return most;
}

// Peak bytes per category of rank 0, which owns the most (Chunks gives the
// first ranks the extra elements). Units in flight: ZeRO-3 holds one unit
// whole at a time, two at a tied head (it borrows the embedding); a gradient
// buffer lives from the unit's first grads() to its GradReady, and the tied
// embedding's from the head's backward to the very end.
MemoryFigures peak_figures(const FormulaInput& in, int stage, int prefetch) {
  const Sharding s = Sharding::of(in.spec, in.ranks);
  const model::ModelConfig c = in.spec.config();
  const bool tied = model::head_is_tied(c);
  std::int64_t largest = 0, largest_but_embed = 0;
  for (std::size_t u = 0; u < s.units().size(); ++u) {
    largest = std::max(largest, s.units()[u].size());
    if (u > 0 || !tied) largest_but_embed = std::max(largest_but_embed, s.units()[u].size());
  }
  const std::int64_t embed = tied ? s.units()[0].size() : 0;
  const std::int64_t head = s.units().back().size();
  const auto b = static_cast<double>(in.element_bytes);
  const auto shard = static_cast<double>(s.owned_elements(0)), psi = static_cast<double>(in.params);
  const int moments = in.spec.optimizer == model::Optimizer::kAdamW ? 2 : 1;
  // At most 1 + prefetch units whole at once, plus the embedding a tied head borrows.
  const double gathered = prefetch > 0 ? static_cast<double>((1 + prefetch) * largest + embed)
                                       : static_cast<double>(std::max(largest, head + embed));
  const double grad_buffers = static_cast<double>(tied ? embed + largest_but_embed : largest);
  MemoryFigures f = train::no_memory_figures();
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = b * (stage == 3 ? shard + gathered : psi);
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = b * (stage == 1 ? psi : shard + grad_buffers);
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = b * moments * shard;
  f[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = 0;
  // Activations are not sharded: those of rank 0's micro-batch, the largest.
  const int m = static_cast<int>(in.knobs.get_int("micro_batches", 1));
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] =
      in.activation_bytes_per_row *
      static_cast<double>(train::shard_rows(in.spec, 0, in.ranks * m).size());
  return f;
}

// What ZeroRun checks on every rank at its start (the sharding, the
// options), checked before any rank runs.
auto check_stage(int stage, int default_prefetch = 0) {
  return [=](const train::RunSpec& spec, int ranks, const train::Knobs& knobs) {
    Sharding::of(spec, ranks);
    ZeroOptions::from_knobs(knobs, stage, default_prefetch).validate(-1, ranks, spec);
  };
}

DTW_REGISTER_STRATEGY({
    .name = "zero1",
    .chapter = "04",
    .description = "ZeRO-1: optimizer state sharded; reduce-scatter, step the shard, allgather",
    .knobs = ZeroOptions::knobs(1),
    .run = [](auto& run) { zero1(run); },
    .bytes_formula = [](const FormulaInput& in) { return busiest_bytes(in, 1); },
    .peak_formula = [](const FormulaInput& in) { return peak_figures(in, 1, 0); },
    .check = check_stage(1)});

DTW_REGISTER_STRATEGY({
    .name = "zero2",
    .chapter = "04",
    .description = "ZeRO-2: gradients sharded too, each unit reduce-scattered when backward ends it",
    .knobs = ZeroOptions::knobs(2),
    .run = [](auto& run) { zero2(run); },
    .bytes_formula = [](const FormulaInput& in) { return busiest_bytes(in, 2); },
    .peak_formula = [](const FormulaInput& in) { return peak_figures(in, 2, 0); },
    .check = check_stage(2)});

DTW_REGISTER_STRATEGY({
    .name = "zero3",
    .chapter = "04",
    .description = "ZeRO-3 / FSDP: parameters sharded too, each unit gathered just before it runs",
    .knobs = ZeroOptions::knobs(3),
    .run = [](auto& run) { zero3(run); },
    .bytes_formula = [](const FormulaInput& in) { return busiest_bytes(in, 3); },
    .peak_formula =
        [](const FormulaInput& in) {
          return peak_figures(in, 3, static_cast<int>(in.knobs.get_int("prefetch", 0)));
        },
    .check = check_stage(3)});

// ZeRO-3 with the next units gathered while this one computes: the same
// bytes as zero3, and up to `prefetch` more units whole at once.
DTW_REGISTER_STRATEGY({
    .name = "zero3-prefetch",
    .chapter = "04",
    .description = "ZeRO-3 with prefetch: the next units' gathers start while this one computes",
    .knobs = ZeroOptions::knobs(3, 1),
    .run = [](auto& run) { zero3_prefetch(run); },
    .bytes_formula = [](const FormulaInput& in) { return busiest_bytes(in, 3); },
    .peak_formula =
        [](const FormulaInput& in) {
          return peak_figures(in, 3, static_cast<int>(in.knobs.get_int("prefetch", 1)));
        },
    .check = check_stage(3, /*default_prefetch=*/1)});

// The run every demo here trains: gpt-tiny in double, so that it can be
// compared with the single-device reference element by element.
train::RunSpec demo_run(std::int64_t steps) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = 12;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

// The first divergence from the reference of what `run` reported, or "".
std::string divergence(train::RankRun<double>& run) {
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        run.comm().rank(), run.spec(), run.losses(), values, begin);
    if (!c.ok) return c.message;
  }
  return "";
}

DTW_REGISTER_DEMO({
    .name = "zero3-memory",
    .chapter = "04",
    .description = "ZeRO-3 trains gpt-tiny exactly as one device does, on a fraction of DDP's memory",
    .default_ranks = 4,
    .min_ranks = 1,
    .max_ranks = 12,  // a global batch of 12 rows: one for each rank at least
    .run = [](Comm& comm) {
      const train::RunSpec spec = demo_run(3);
      const train::Knobs knobs;
      train::RankRun<double> run(comm, spec, knobs);
      zero3(run);
      const std::string why = divergence(run);
      const MemorySnapshot m = comm.exec().ledger()->snapshot();
      const std::int64_t state = m.peak_of(MemoryCategory::kParameters) +
                                 m.peak_of(MemoryCategory::kGradients) +
                                 m.peak_of(MemoryCategory::kOptimizerState);
      const std::int64_t ddp = 4 * 8 * model::param_layout(spec.config()).size();  // p, g, m, v
      return DemoCheck{why.empty(),
                       why.empty() ? "model state " + format_bytes(state) + " per rank, DDP's " +
                                         format_bytes(ddp) + "; matches the reference"
                                   : why};
    }});

DTW_REGISTER_DEMO({
    .name = "zero3-uneven-layers",
    .chapter = "04",
    .description = "ZeRO-3, rank 1 runs a layer once more (DeepSpeed#7998, #8262: a hang); "
                   "the unit fingerprint names the ranks and layers",
    .default_ranks = 3,
    .min_ranks = 2,
    .max_ranks = 12,
    .catches = "zero3 gather",
    .run = [](Comm& comm) {
      const train::RunSpec spec = demo_run(1);
      const train::Knobs knobs;
      train::RankRun<double> run(comm, spec, knobs);
      zero3_rank_runs_a_layer_twice(run);
      return DemoCheck{false, "the gathers of different layers were not caught"};
    }});

DTW_REGISTER_DEMO({
    .name = "zero2-early-reduce",
    .chapter = "04",
    .description = "ZeRO-2 reduce-scatters during the first micro-batch only (InfiniTrain#213); "
                   "the reference names the first wrong parameter",
    .default_ranks = 2,
    .min_ranks = 1,
    .max_ranks = 6,  // 12 rows in 2 micro-batches: a row of each for every rank
    .catches = "diverged from the single-device run",
    .run = [](Comm& comm) {
      const train::RunSpec spec = demo_run(2);
      const train::Knobs knobs = train::Knobs::parse({"micro_batches=2"});
      train::RankRun<double> run(comm, spec, knobs);
      zero2_reduces_before_accumulation_ends(run);
      const std::string why = divergence(run);
      DTW_CHECK(why.empty(), ::dtw::Error, "ZeRO-2 diverged from the single-device run: " << why);
      return DemoCheck{false, "the lost micro-batches went unnoticed"};
    }});

}  // namespace
}  // namespace dtw::ch04
