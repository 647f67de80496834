// Chapter 06's strategies for `dtw train --strategy` and `dtw bench train`
// (with the chapter's formulas beside the measurements), its demos for
// `dtw run` and `dtw tour`, and its pitfalls for `dtw run pitfall`.
// Solution only: tools/gen-labs does not copy demos.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "dtw/demo.h"
#include "dtw/train/reference.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {

using train::FormulaInput;
using train::MemoryFigures;

// The busiest rank's bytes per step (rank 0: the largest vocabulary slice).
double step_bytes(const FormulaInput& in, bool sp) {
  double most = 0;
  for (int r = 0; r < in.ranks; ++r)
    most = std::max(most, static_cast<double>(bytes_per_step(in.spec.config(), in.spec.batch,
                                                             in.spec.sequence(), r, in.ranks, sp,
                                                             in.element_bytes)));
  return most;
}

// Rank 0's memory: its parameters, gradients and AdamW's two moments (SGD:
// one), and the activations the model keeps for its shard.
MemoryFigures peak(const FormulaInput& in, bool sp) {
  MemoryFigures f = train::no_memory_figures();
  const model::ModelConfig c = in.spec.config();
  const double psi = static_cast<double>(params_per_rank(c, 0, in.ranks, true) * in.element_bytes);
  const bool adam = in.spec.optimizer == model::Optimizer::kAdamW;
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = adam ? 2 * psi : psi;
  // The chapter's derivations (rank 0 holds the largest vocabulary slice).
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] = static_cast<double>(
      !sp ? tp_activation_bytes(c, in.spec.batch, in.spec.sequence(), 0, in.ranks,
                                in.element_bytes)
          : tp_sp_activation_bytes(c, in.spec.batch, in.spec.sequence(), 0, in.ranks,
                                   in.element_bytes));
  return f;
}

DTW_REGISTER_STRATEGY(
    {.name = "tp",
     .chapter = "06",
     .description = "Megatron tensor parallelism: column/row-parallel layers, vocab-parallel loss",
     .min_ranks = 1,
     .run = [](auto& run) { tensor_parallel(run); },
     .bytes_formula = [](const FormulaInput& in) { return step_bytes(in, false); },
     .peak_formula = [](const FormulaInput& in) { return peak(in, false); },
     .bubble_formula = nullptr,
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs&) { check_tp_run(spec, ranks, -1, false); }});
DTW_REGISTER_STRATEGY(
    {.name = "tp-sp",
     .chapter = "06",
     .description = "tensor parallelism + Megatron-SP: norms on T/t tokens, reduce-scatter/allgather",
     .min_ranks = 1,
     .run = [](auto& run) { tensor_parallel_sp(run); },
     .bytes_formula = [](const FormulaInput& in) { return step_bytes(in, true); },
     .peak_formula = [](const FormulaInput& in) { return peak(in, true); },
     .bubble_formula = nullptr,
     .check = [](const train::RunSpec& spec, int ranks,
                 const train::Knobs&) { check_tp_run(spec, ranks, -1, true); }});

// ---- demos and pitfalls: gpt-tiny in double, checked against the reference ----------

train::RunSpec demo_run(double clip, std::int64_t vocab) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 3;
  spec.batch = 4;
  spec.warmup_steps = 1;
  spec.clip_norm = clip;
  spec.dtype = train::DType::kFloat64;
  if (vocab != spec.config().vocab) {
    model::ModelConfig c = spec.config();
    c.vocab = vocab;
    c.name = "gpt-tiny-vocab" + std::to_string(vocab);
    spec.model = c.name;
    spec.custom_config = c;
  }
  return spec;
}

using Strategy64 = std::function<void(train::RankRun<double>&)>;

// Trains on this rank and compares with the reference; a pitfall throws
// the mismatch (the first divergent element) instead of returning it.
DemoCheck train_and_compare(Comm& comm, const train::RunSpec& spec, const Strategy64& strategy,
                            bool pitfall) {
  train::RankRun<double> run(comm, spec, {});
  strategy(run);
  double max_diff = 0;
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        comm.rank(), spec, run.losses(), values, begin, train::kDoubleTolerance, spec.steps);
    if (!c.ok) {
      DTW_CHECK_ARG(!pitfall, "the model differs from the reference: " << c.message);
      return {false, c.message, 0};
    }
    max_diff = std::max(max_diff, c.max_abs_diff);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "%s, %lld steps, batch %lld, t = %d: equal to the reference (max |dθ| %.1e)",
                spec.model.c_str(), static_cast<long long>(spec.steps),
                static_cast<long long>(spec.batch), comm.size(), max_diff);
  return {true, detail, 0};
}

void register_one(const char* name, const char* description, const char* catches,
                  Strategy64 strategy, int ranks, double clip = 0.05, std::int64_t vocab = 96) {
  const bool pitfall = catches[0] != '\0';
  register_demo({.name = name,
                 .chapter = "06",
                 .description = description,
                 .default_ranks = ranks,
                 .min_ranks = pitfall ? 2 : 1,
                 .max_ranks = 4,  // gpt-tiny's 4 heads
                 .expects_deadlock = false,
                 .catches = catches,
                 .run = [=](Comm& comm) {
                   return train_and_compare(comm, demo_run(clip, vocab), strategy, pitfall);
                 }});
}

const bool kRegistered = [] {
  register_one("tp", "Megatron TP on gpt-tiny: f/g around every sublayer, vocab-parallel loss", "",
               [](auto& run) { tensor_parallel(run); }, 2);
  register_one("tp-sp", "TP + sequence parallelism on gpt-tiny: reduce-scatter/allgather", "",
               [](auto& run) { tensor_parallel_sp(run); }, 2);
  register_one("sp-norm-grads-not-reduced",
               "SP without summing the norms' gradients (Megatron-LM#1446): copies drift",
               "differs", [](auto& run) { tensor_parallel_sp(run, {.norm_grads_not_reduced = true}); },
               2);
  register_one("clip-norm-counts-copies",
               "clip norm summed over every rank's replicated copies (torchtune#2420)",
               "differs from the reference",
               [](auto& run) { tensor_parallel(run, {.clip_counts_copies = true}); }, 2);
  register_one("vocab-local-statistics",
               "vocab-parallel loss from the local max and sum (Megatron-LM#737)",
               "differs from the reference",
               [](auto& run) { tensor_parallel(run, {.local_vocab_statistics = true}); }, 2);
  register_one("vocab-padded-wrongly",
               "vocabulary of 99 padded to 100 on 4 ranks, pad rows in the softmax (Megatron-LM#1754)",
               "differs from the reference",
               [](auto& run) { tensor_parallel(run, {.pad_vocabulary = true}); }, 4, 0.05, 99);
  return true;
}();

}  // namespace
}  // namespace dtw::ch06
