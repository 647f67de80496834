// Chapter 05's strategies, registered for `dtw train --strategy` and `dtw
// bench train` with their formulas; the demo of `dtw run` and `dtw tour`; and
// the pitfalls from the field (`dtw run pitfall NAME`). Solution only:
// tools/gen-labs does not copy demos.cpp.
#include <algorithm>
#include <string>

#include "dtw/demo.h"
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/train/network.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {
namespace {

using train::FormulaInput;

// Pitfall (torchtitan#775): 1F1B with the warm-up written for m >= p, whose
// lists are right for every m >= p. With fewer micro-batches than stages it
// names micro-batches that do not exist; check_schedule stops it before a
// message. Solution only: it is the learner's step 05.2 with one bug.
Schedule one_f_one_b_unclamped(int p, int m) {
  Schedule s;
  s.kind = ScheduleKind::kOneFOneB;
  s.ranks = p;
  s.micro_batches = m;
  s.actions.resize(static_cast<std::size_t>(p));
  for (int st = 0; st < p; ++st) {
    const int warmup = p - st - 1;  // the bug: not min(p − st − 1, m)
    int next_forward = 0, next_backward = 0;
    for (int i = 0; i < warmup; ++i) s.forward(st, next_forward++);
    for (int i = 0; i < m - warmup; ++i) {
      s.forward(st, next_forward++);
      s.backward(st, next_backward++);
    }
    for (int i = 0; i < warmup; ++i) s.backward(st, next_backward++);
  }
  return s;
}

// The run a formula describes: the strategy's settings and the split that
// balance=params or blocks gives (balance=time is measured, so the formulas
// use the parameter split for it).
struct Shape {
  PipelineSettings settings;
  Schedule schedule;
  StageMap map;
};
Shape shape_of(const FormulaInput& in, ScheduleKind kind) {
  Shape s{pipeline_settings(in.knobs, kind, in.spec, in.ranks), {}, {}};
  const Balance balance = s.settings.balance == Balance::kTime ? Balance::kParams : s.settings.balance;
  s.schedule = make_schedule(kind, in.ranks, s.settings.micro_batches, s.settings.virtual_stages);
  s.map = make_stage_map(in.spec, balance, in.ranks, s.settings.virtual_stages,
                         s.settings.micro_batches, nullptr);
  return s;
}

// Bytes the busiest rank sends per step: per chunk boundary it crosses, the
// whole batch's activation forward and its gradient back (B rows × width;
// micro-batching cuts the batch, not the bytes), the tied embedding's V·C
// each way between the two ends, and the two-number allreduce.
double busiest_bytes(const FormulaInput& in, ScheduleKind kind) {
  const Shape s = shape_of(in, kind);
  const auto net = train::Network<double>::make(in.spec.config());
  const train::Batch all = train::make_batch(in.spec, 0);
  const int n = s.map.chunk_count(), p = in.ranks;
  const model::ModelConfig c = in.spec.config();
  const bool tied = model::head_is_tied(c) && p > 1;
  double busiest = 0;
  for (int r = 0; r < p; ++r) {
    double values = 0;
    for (int ch : s.map.chunks_of(r)) {
      if (ch < n - 1) values += static_cast<double>(net->boundary_elements(s.map.chunks[ch].end, all));
      if (ch > 0) values += static_cast<double>(net->boundary_elements(s.map.chunks[ch].begin, all));
    }
    if (tied && (r == 0 || r == s.map.rank_of(n - 1))) values += static_cast<double>(c.vocab * c.dim);
    busiest = std::max(busiest, values * static_cast<double>(in.element_bytes));
  }
  return busiest + (p > 1 ? 2.0 * (p - 1) / p * 16 : 0);
}

// The busiest rank's activations, read off its list (activation_peak); its
// parameters, gradients and optimizer state from its chunks.
train::MemoryFigures busiest_peak(const FormulaInput& in, ScheduleKind kind) {
  const Shape s = shape_of(in, kind);
  const model::ModelConfig c = in.spec.config();
  const model::ParamLayout layout = model::param_layout(c);
  const auto units = model::model_units(c, layout);
  const std::int64_t wte_end = model::tied_wte(c, layout).end;
  train::MemoryFigures f = train::no_memory_figures();
  const auto at = [&](MemoryCategory k) -> double& { return f[static_cast<std::size_t>(k)]; };
  for (MemoryCategory k : {MemoryCategory::kParameters, MemoryCategory::kGradients,
                           MemoryCategory::kOptimizerState, MemoryCategory::kActivations})
    at(k) = 0;
  const double e = static_cast<double>(in.element_bytes);
  const double moments = in.spec.optimizer == model::Optimizer::kAdamW ? 2 : 1;
  for (int r = 0; r < in.ranks; ++r) {
    const train::ReplicaPlan plan = stage_plan(s.map, units, wte_end, r);
    double held = 0, stepped = 0;
    for (const train::Range& x : plan.params) held += static_cast<double>(x.size());
    for (const train::Range& x : plan.optimizer) stepped += static_cast<double>(x.size());
    at(MemoryCategory::kParameters) = std::max(at(MemoryCategory::kParameters), held * e);
    at(MemoryCategory::kGradients) = std::max(at(MemoryCategory::kGradients), held * e);
    at(MemoryCategory::kOptimizerState) =
        std::max(at(MemoryCategory::kOptimizerState), moments * stepped * e);
    const std::int64_t acts =
        in.element_bytes == 8
            ? activation_peak<double>(s.schedule, s.map, in.spec, r, s.settings.executor.checkpoint)
            : activation_peak<float>(s.schedule, s.map, in.spec, r, s.settings.executor.checkpoint);
    at(MemoryCategory::kActivations) = std::max(at(MemoryCategory::kActivations), static_cast<double>(acts));
  }
  return f;
}

// The bubble with equal chunk times and free messages (the chapter derives
// each): the share of rank-time not spent computing.
double bubble(const FormulaInput& in, ScheduleKind kind) {
  const PipelineSettings s = pipeline_settings(in.knobs, kind, in.spec, in.ranks);
  const double p = in.ranks, m = s.micro_batches, v = s.virtual_stages;
  if (kind == ScheduleKind::kNaive) return (p - 1) / p;
  if (kind != ScheduleKind::kInterleaved) return (p - 1) / (m + p - 1);
  return m >= p ? (p - 1) / (v * m + p - 1) : (v * (p - m) + m - 1) / (v * p + m - 1);
}

#define DTW_CH05_STRATEGY(NAME, KIND, FN, DESCRIPTION)                                   \
  DTW_REGISTER_STRATEGY({.name = NAME,                                                    \
                         .chapter = "05",                                                 \
                         .description = DESCRIPTION,                                      \
                         .knobs = pipeline_knobs(KIND),                                   \
                         .min_ranks = 1,                                                  \
                         .run = [](auto& run) { FN(run); },                               \
                         .bytes_formula = [](const FormulaInput& in) { return busiest_bytes(in, KIND); }, \
                         .peak_formula = [](const FormulaInput& in) { return busiest_peak(in, KIND); },   \
                         .bubble_formula = [](const FormulaInput& in) { return bubble(in, KIND); }, \
                         .check = [](const train::RunSpec& spec, int ranks,                 \
                                     const train::Knobs& knobs) {                            \
                           check_pipeline_run(knobs, KIND, spec, ranks);                  \
                         }})
DTW_CH05_STRATEGY("pp-naive", ScheduleKind::kNaive, pp_naive,
                  "pipeline, one micro-batch in the pipe at a time");
DTW_CH05_STRATEGY("pp-gpipe", ScheduleKind::kGPipe, pp_gpipe,
                  "pipeline, GPipe: all forwards, then all backwards");
DTW_CH05_STRATEGY("pp-1f1b", ScheduleKind::kOneFOneB, pp_1f1b,
                  "pipeline, 1F1B: at most p-s micro-batches in flight");
DTW_CH05_STRATEGY("pp-interleaved", ScheduleKind::kInterleaved, pp_interleaved,
                  "pipeline, interleaved 1F1B over v chunks per rank");

// gpt-tiny in double for a few steps, checked on every rank against the
// reference; `knobs` picks the schedule's settings.
DemoCheck train_and_check(Comm& comm, void (*strategy)(train::RankRun<double>&),
                          train::Knobs knobs) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 3;
  spec.dtype = train::DType::kFloat64;
  train::RankRun<double> run(comm, spec, knobs);
  strategy(run);
  std::string why;
  bool ok = true;
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        comm.rank(), spec, run.losses(), std::span<const double>(values), begin);
    if (ok && !c.ok) why = c.message;
    ok = ok && c.ok;
  }
  return {ok, ok ? "3 steps of gpt-tiny match the single-device reference (" + knobs.describe() + ")" : why};
}

DTW_REGISTER_DEMO({.name = "pipeline-1f1b",
                   .chapter = "05",
                   .description = "gpt-tiny cut into 4 stages, 1F1B over 8 micro-batches, vs the reference",
                   .default_ranks = 4,
                   .min_ranks = 1,
                   .max_ranks = 4,  // gpt-tiny has 4 units to cut into stages
                   .run = [](Comm& comm) {
                     return train_and_check(comm, pp_1f1b<double>,
                                            train::Knobs().set("micro_batches", "8"));
                   }});

// The pitfalls (the stories are in the chapter's README, "Pitfalls from the field").
DTW_REGISTER_DEMO({.name = "pp-both-send-first",
                   .chapter = "05",
                   .description = "1F1B with blocking sends: stage 0 sends an activation while stage 1 "
                                  "sends a gradient, both wait (pytorch#172668)",
                   .default_ranks = 2,
                   .min_ranks = 2,
                   .max_ranks = 2,  // the story is two stages' sends crossing
                   .expects_deadlock = true,  // caught by the detector; on MPI a real hang
                   .catches = "gradient of micro-batch 0 from chunk 1 to chunk 0",
                   .run = [](Comm& comm) {
                     return train_and_check(comm, pp_1f1b<double>,
                                            train::Knobs().set("micro_batches", "4").set("sends", "blocking"));
                   }});
DTW_REGISTER_DEMO({.name = "pp-interleaved-criss-cross",
                   .chapter = "05",
                   .description = "interleaved 1F1B with blocking sends: rank 1's wrap-around send meets "
                                  "rank 0's, both wait (pytorch#127332)",
                   .default_ranks = 2,
                   .min_ranks = 2,
                   .max_ranks = 2,
                   .expects_deadlock = true,
                   .catches = "activation of micro-batch 0 from chunk 1 to chunk 2",
                   .run = [](Comm& comm) {
                     return train_and_check(comm, pp_interleaved<double>,
                                            train::Knobs().set("micro_batches", "4").set("sends", "blocking"));
                   }});
DTW_REGISTER_DEMO({.name = "pp-fewer-micro-batches",
                   .chapter = "05",
                   .description = "a 1F1B warm-up written for m >= p, run with m = 1 on 4 stages "
                                  "(pytorch/torchtitan#775): check_schedule stops it",
                   .default_ranks = 4,
                   .min_ranks = 3,  // on 2 stages the broken warm-up still happens to run
                   .max_ranks = 4,
                   .catches = "but the step has m = 1 micro-batches",
                   .run = [](Comm& comm) {
                     return train_and_check(
                         comm,
                         [](train::RankRun<double>& run) {
                           PipelineSettings s = pipeline_settings(
                               train::Knobs().set("micro_batches", "1"), ScheduleKind::kOneFOneB,
                               run.spec(), run.comm().size());
                           train_pipeline(run, one_f_one_b_unclamped(run.comm().size(), 1), s);
                         },
                         {});
                   }});

}  // namespace
}  // namespace dtw::ch05
