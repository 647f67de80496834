// The strategy registry, RankRun and the harness (run_ranks, run_strategy).
#include "dtw/train/strategy.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "dtw/errors.h"
#include "dtw/process_comm.h"
#include "dtw/results.h"
#include "dtw/model/units.h"
#include "dtw/train/network.h"
#include "dtw/train/reference.h"

namespace dtw::train {

// ---- RankRun ----------------------------------------------------------------------

template <TrainElement T>
RankRun<T>::RankRun(Comm& comm, const RunSpec& spec, const Knobs& knobs)
    : comm_(comm),
      spec_(spec),
      knobs_(knobs),
      last_step_(std::chrono::steady_clock::now()),
      tracer_(&comm.tracer()) {
  tracer_->set_work_clock([this] { return layer_times()->flops_added(); }, this);
}

template <TrainElement T>
RankRun<T>::~RankRun() {
  tracer_->clear_work_clock(this);
}

template <TrainElement T>
void RankRun<T>::record_loss(std::int64_t step, double loss) {
  DTW_CHECK_ARG(step == static_cast<std::int64_t>(losses_.size()),
                "rank " << comm_.rank() << ": record_loss for step " << step << " after "
                        << losses_.size() << " recorded steps (record each step once, in order)");
  // Every later step would be NaN too: stop at the first, before the progress
  // line, so the run fails with its cause instead of ending "loss 2.05 -> nan".
  DTW_CHECK(std::isfinite(loss), Diverged,
            "the run diverged: loss " << loss << " at step " << step + 1 << " of " << spec_.steps
                                      << " (" << (spec_.optimizer == model::Optimizer::kAdamW ? "adamw" : "sgd") << " lr "
                                      << spec_.lr() << ", warm-up " << spec_.warmup_steps
                                      << " steps): lower --lr or warm up longer");
  losses_.push_back(loss);
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::duration<double> took = now - last_step_;
  last_step_ = now;
  if (on_step) on_step({step, loss, std::nan(""), spec_.tokens_per_step(), took.count()});
}

template <TrainElement T>
void RankRun<T>::record_resumed(std::span<const double> losses) {
  DTW_CHECK_ARG(losses_.empty(), "rank " << comm_.rank() << ": record_resumed after "
                                         << losses_.size()
                                         << " recorded steps (a checkpoint's steps come first)");
  DTW_CHECK_ARG(static_cast<std::int64_t>(losses.size()) <= spec_.steps,
                "rank " << comm_.rank() << ": a checkpoint after " << losses.size()
                        << " steps, but this run has only " << spec_.steps);
  losses_.assign(losses.begin(), losses.end());
  resumed_steps_ = static_cast<std::int64_t>(losses.size());
  last_step_ = std::chrono::steady_clock::now();
}

template <TrainElement T>
void RankRun<T>::report_params(std::span<const T> params, std::int64_t begin) {
  reported_.emplace_back(begin, std::vector<T>(params.begin(), params.end()));
}

template <TrainElement T>
void RankRun<T>::report(Replica<T>& replica) {
  // Offsets of the whole model: a shard's slices are placed through their views.
  for (const auto& [begin, values] : replica.whole_params()) report_params(values, begin);
}

template <TrainElement T>
Tracer::Phase RankRun<T>::phase(std::string name, const PhaseInfo& info) {
  return comm_.tracer().phase(std::move(name), {info.compute, info.stage, info.micro_batch,
                                                info.flops, info.bytes});
}

// ---- registry ---------------------------------------------------------------------

FormulaInput FormulaInput::of(const RunSpec& spec, int ranks, const Knobs& knobs) {
  const model::ModelConfig config = spec.config();
  const bool f64 = spec.dtype == DType::kFloat64;
  FormulaInput in{spec, ranks, knobs, model::param_layout(config).size(), f64 ? 8 : 4, 0};
  Batch one;
  one.rows = 1;
  one.seq_len = spec.sequence();
  const model::UnitRange all{
      0, static_cast<int>(model::model_units(config, model::param_layout(config)).size())};
  in.activation_bytes_per_row = static_cast<double>(
      f64 ? Network<double>::make(config)->activation_bytes(all, one)
          : Network<float>::make(config)->activation_bytes(all, one));
  return in;
}

MemoryFigures no_memory_figures() {
  MemoryFigures f;
  f.fill(std::nan(""));
  return f;
}

namespace {

// The single-device reference as a strategy: the baseline row of every table.
template <class T>
void single_device(RankRun<T>& run) {
  DTW_CHECK_ARG(run.comm().size() == 1,
                "strategy single runs on one rank, not " << run.comm().size());
  const RunSpec& spec = run.spec();
  Replica<T> replica(spec, run.exec(), ReplicaPlan::whole(spec));
  replica.set_times(run.layer_times());
  const Cost pass = replica.pass_cost(replica.network().all(), make_batch(spec, 0), true);
  const Cost opt = replica.optimizer_cost();
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = replica.forward_backward(step, 0, 1);
    }
    {
      auto phase = run.phase("optimizer", {.flops = opt.flops, .bytes = opt.bytes});
      model::ScopedLayerTimer timer(run.layer_times(), "optimizer");
      replica.clip(replica.local_sum_of_squares());
      replica.step(step);
    }
    run.record_loss(step, loss);
  }
  run.report(replica);
}

MemoryFigures single_peak(const FormulaInput& in) {
  MemoryFigures f = no_memory_figures();
  const double psi = static_cast<double>(in.params * in.element_bytes);
  const bool adam = in.spec.optimizer == model::Optimizer::kAdamW;
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = psi;
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] = adam ? 2 * psi : psi;
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] =
      in.activation_bytes_per_row * static_cast<double>(in.spec.batch);
  f[static_cast<std::size_t>(MemoryCategory::kCommBuffers)] = 0;
  return f;
}

struct Registry {
  std::mutex mutex;
  std::vector<Strategy> all;
  std::vector<std::string> duplicates;
  Registry() {
    all.push_back({.name = "single",
                   .chapter = "",
                   .description = "the reference: one device, the whole batch",
                   .min_ranks = 1,
                   .max_ranks = 1,
                   .run = [](auto& run) { single_device(run); },
                   .bytes_formula = [](const FormulaInput&) { return 0.0; },
                   .peak_formula = single_peak,
                   .bubble_formula = nullptr});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const std::vector<Strategy>& strategies() { return registry().all; }

bool register_strategy(Strategy strategy) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const Strategy& s : r.all) {
    if (s.name == strategy.name) {
      r.duplicates.push_back(strategy.name + " (chapters " + s.chapter + " and " +
                             strategy.chapter + ")");
      return false;
    }
  }
  r.all.push_back(std::move(strategy));
  return true;
}

const Strategy& find_strategy(std::string_view name) {
  Registry& r = registry();
  for (const std::string& d : r.duplicates)
    DTW_CHECK_ARG(d.rfind(std::string(name) + " ", 0) != 0,
                  "strategy " << name << " is registered twice: " << d);
  std::string known;
  for (const Strategy& s : r.all) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  DTW_CHECK_ARG(false, "unknown strategy '" << name << "'; known: " << known);
  return r.all.front();
}

// ---- the harness -------------------------------------------------------------------

namespace {
struct Summary {  // the trivially copyable part of a RankOutcome
  int matches = 1;
  double max_abs_diff = 0;
  std::int64_t compared = 0;
  double seconds = 0;
  std::int64_t resumed_steps = 0;
};
}  // namespace

template <TrainElement T>
RunOutcome run_ranks(const RunSpec& spec_in, const HarnessOptions& opts,
                     const std::function<void(RankRun<T>&)>& fn) {
  RunSpec spec = spec_in;
  spec.dtype = dtype_of<T>();
  spec.validate();
  DTW_CHECK_ARG(opts.ranks >= 1, "run_ranks: ranks " << opts.ranks << " must be at least 1");
  LaunchOptions lo;
  lo.backend = opts.backend;
  lo.timeout = opts.timeout;
  lo.trace = opts.trace;
  lo.memory_cap = opts.memory_cap;
  // The ranks' data, estimated, so that a run the machine cannot hold is
  // refused before any rank starts (world_fit.h) rather than killed midway.
  lo.bytes_per_rank = rank_bytes_estimate(spec, opts.ranks);
  RunOutcome out;
  out.checked = opts.compare;
  std::mutex mutex;
  bool filled = false;
  std::vector<Summary> summaries;
  std::vector<std::string> messages;
  std::vector<std::vector<double>> all_losses;
  out.report = launch(opts.ranks, lo, [&](Comm& comm) {
    RankRun<T> run(comm, spec, opts.knobs);
    if (comm.world_rank() == 0) {
      run.on_step = opts.on_step;
      run.set_layer_times(opts.layer_times);
    }
    const auto start = std::chrono::steady_clock::now();
    fn(run);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    // The comparison runs here, inside the rank, so it works across processes.
    Summary mine;
    mine.seconds = took.count();
    mine.resumed_steps = run.resumed_steps();
    std::string why;
    std::span<const double> losses = run.losses();
    const std::int64_t steps_done = spec.steps;
    if (opts.compare) {
      if (run.reported().empty() && !losses.empty()) {
        const ReferenceCheck c = compare_to_reference<T>(comm.rank(), spec, losses, {}, 0,
                                                         default_tolerance(spec.dtype), steps_done);
        mine.matches = c.ok;
        why = c.message;
      }
      for (const auto& [begin, values] : run.reported()) {
        const ReferenceCheck c = compare_to_reference<T>(comm.rank(), spec, losses, values, begin,
                                                         default_tolerance(spec.dtype), steps_done);
        if (mine.matches && !c.ok) {
          mine.matches = 0;
          why = c.message;
        }
        mine.max_abs_diff = std::max(mine.max_abs_diff, c.max_abs_diff);
        mine.compared += c.compared;
        losses = {};  // compared once
      }
    }
    auto s = allgather_results(comm, mine);
    auto m = allgather_results(comm, why);
    auto l = allgather_results(comm, std::vector<double>(run.losses()));
    std::lock_guard<std::mutex> lock(mutex);
    if (filled) return;
    filled = true;
    summaries = std::move(s);
    messages = std::move(m);
    all_losses = std::move(l);
  });
  // On the mpi backend a process beyond the world ran no rank: it takes the
  // outcome from the processes that did (collective over the job, which runs
  // this same call on every process).
  if (const std::unique_ptr<Comm> job = process_comm(out.report.backend)) {
    const auto s = allgather_results(*job, summaries);
    const auto m = allgather_results(*job, messages);
    const auto l = allgather_results(*job, all_losses);
    for (std::size_t p = 0; p < s.size() && !filled; ++p) {
      if (s[p].empty()) continue;
      summaries = s[p];
      messages = m[p];
      all_losses = l[p];
      filled = true;
    }
  }
  {
    for (std::size_t r = 0; r < summaries.size(); ++r) {
      RankOutcome o;
      o.rank = static_cast<int>(r);
      o.matches = summaries[r].matches != 0;
      o.mismatch = messages[r];
      o.max_abs_diff = summaries[r].max_abs_diff;
      o.compared = summaries[r].compared;
      o.seconds = summaries[r].seconds;
      o.resumed_steps = summaries[r].resumed_steps;
      o.losses = all_losses[r];
      out.ranks.push_back(std::move(o));
    }
  }
  for (const RankOutcome& o : out.ranks) {
    if (out.matches && !o.matches) {
      out.matches = false;
      out.mismatch = o.mismatch;
    }
    out.max_abs_param_diff = std::max(out.max_abs_param_diff, o.max_abs_diff);
    out.compared += o.compared;
    out.seconds = std::max(out.seconds, o.seconds);
    out.resumed_steps = std::max(out.resumed_steps, o.resumed_steps);
    if (out.losses.empty() && static_cast<std::int64_t>(o.losses.size()) == spec.steps)
      out.losses = o.losses;
  }
  return out;
}

RunOutcome run_strategy(const Strategy& strategy, const RunSpec& spec, const HarnessOptions& opts) {
  check_strategy(strategy, spec, opts.ranks, opts.knobs);
  // A run that cannot reproduce the reference (asynchronous training) is not
  // compared with it; RunOutcome::checked says so.
  HarnessOptions o = opts;
  o.compare = opts.compare && strategy.reproduces(opts.ranks, opts.knobs);
  if (spec.dtype == DType::kFloat64) return run_ranks<double>(spec, o, strategy.run.f64);
  return run_ranks<float>(spec, o, strategy.run.f32);
}

template class RankRun<float>;
template class RankRun<double>;
template RunOutcome run_ranks<float>(const RunSpec&, const HarnessOptions&,
                                     const std::function<void(RankRun<float>&)>&);
template RunOutcome run_ranks<double>(const RunSpec&, const HarnessOptions&,
                                      const std::function<void(RankRun<double>&)>&);

}  // namespace dtw::train
