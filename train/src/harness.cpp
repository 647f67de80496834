// The harness: run_ranks launches a rank function, compares what each rank
// reported with the reference inside the rank, and gathers the outcomes;
// run_strategy runs a registered strategy through it.
#include "dtw/train/harness.h"

#include <algorithm>
#include <mutex>

#include "dtw/errors.h"
#include "dtw/process_comm.h"
#include "dtw/results.h"
#include "dtw/train/reference.h"

namespace dtw::train {

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
  DTW_CHECK_ARG(static_cast<bool>(fn), "run_ranks: the rank function is empty (an empty "
                                       "std::function); pass a callable taking RankRun<T>&");
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

template RunOutcome run_ranks<float>(const RunSpec&, const HarnessOptions&,
                                     const std::function<void(RankRun<float>&)>&);
template RunOutcome run_ranks<double>(const RunSpec&, const HarnessOptions&,
                                      const std::function<void(RankRun<double>&)>&);

}  // namespace dtw::train
