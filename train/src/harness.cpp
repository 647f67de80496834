// The harness: run_ranks launches a rank function, compares what each rank
// reported with the reference inside the rank, and gathers the outcomes;
// run_strategy runs a registered strategy through it.
#include "dtw/train/harness.h"

#include <algorithm>
#include <mutex>
#include <sstream>

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
  double largest_rel_error = 0;
};
}  // namespace

template <TrainElement T>
RunOutcome run_ranks(const RunSpec& spec_in, const HarnessOptions& opts,
                     const std::function<void(RankRun<T>&)>& fn);

namespace {

// A rank's layer times as text, to travel in an allgather: a line per kind,
// "kind seconds flops calls" (kinds are single words), doubles in full.
std::string encode_times(const model::LayerTimes& times) {
  std::ostringstream out;
  out.precision(17);
  for (const model::LayerTimes::Entry& e : times.entries())
    out << e.kind << ' ' << e.seconds << ' ' << e.flops << ' ' << e.calls << '\n';
  return out.str();
}

std::vector<model::LayerTimes::Entry> decode_times(const std::string& text) {
  std::istringstream in(text);
  std::vector<model::LayerTimes::Entry> entries;
  model::LayerTimes::Entry e;
  while (in >> e.kind >> e.seconds >> e.flops >> e.calls) entries.push_back(e);
  return entries;
}

// 433152 → "433,152": counts of elements are read, not parsed.
std::string thousands(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// Every element of the model must have been reported by some rank: a
// strategy that reports nothing, or half, compares nothing wrong and would
// pass. The union of what the ranks reported is the coverage.
void check_coverage(RunOutcome& out, const RunSpec& spec,
                    const std::vector<std::vector<std::int64_t>>& reported) {
  const model::ParamLayout layout = model::param_layout(spec.config());
  out.model_elements = layout.size();
  std::vector<std::pair<std::int64_t, std::int64_t>> all;
  for (const auto& ranges : reported)
    for (std::size_t i = 0; i + 1 < ranges.size(); i += 2) all.emplace_back(ranges[i], ranges[i + 1]);
  std::sort(all.begin(), all.end());
  std::int64_t covered = 0, reach = 0, first_gap = -1;
  for (const auto& [b, e] : all) {
    if (b > reach && first_gap < 0) first_gap = reach;
    if (e > reach) {
      covered += e - std::max(b, reach);
      reach = e;
    }
  }
  if (reach < out.model_elements && first_gap < 0) first_gap = reach;
  out.covered = covered;
  if (covered == out.model_elements) return;
  std::ostringstream os;
  os << "parameters reported by no rank: " << thousands(out.model_elements - covered) << " of "
     << thousands(out.model_elements) << " elements, the first " << element_name(layout, first_gap)
     << " (flat index " << first_gap << "); a strategy reports every parameter it holds at the "
     << "end (RankRun::report)";
  const std::size_t shown = std::min<std::size_t>(out.ranks.size(), 16);
  for (std::size_t r = 0; r < shown; ++r)
    os << (r == 0 ? ": " : ", ") << "rank " << r << " reported " << thousands(out.ranks[r].compared)
       << " of " << thousands(out.model_elements);
  if (shown < out.ranks.size()) os << ", … (" << out.ranks.size() - shown << " more ranks)";
  out.matches = false;
  out.mismatch = os.str() + (out.mismatch.empty() ? "" : "; and " + out.mismatch);
}

// A diverged double run is rerun on fewer steps, bisecting for the first
// number of steps after which some rank differs: there the ranks that differ
// are where the error began (later, an allreduce has spread it to all), and
// the element with the largest error is its origin rather than the first in
// layer order.
template <TrainElement T>
void locate_divergence(RunOutcome& out, const RunSpec& spec, const HarnessOptions& opts,
                       const std::function<void(RankRun<T>&)>& fn) {
  HarnessOptions quiet = opts;
  quiet.locate_divergence = false;
  quiet.trace = false;
  quiet.on_step = {};
  quiet.layer_times = nullptr;
  std::int64_t lo = 1, hi = spec.steps;  // after hi steps it differs
  RunOutcome at_hi = out;
  try {
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      RunSpec shorter = spec;
      shorter.steps = mid;
      RunOutcome o = run_ranks<T>(shorter, quiet, fn);
      if (o.matches) {
        lo = mid + 1;
      } else {
        hi = mid;
        at_hi = std::move(o);
      }
    }
  } catch (const Error&) {
    return;  // a strategy that cannot run shorter (a knob naming a later step): no origin
  }
  Divergence& d = out.divergence;
  d.step = hi;
  double worst = -1;
  std::string first_why;  // the first diverging rank's own message
  for (const RankOutcome& o : at_hi.ranks) {
    if (o.matches) continue;
    d.ranks.push_back(o.rank);
    if (first_why.empty()) first_why = o.mismatch;
    // Only the loss may differ (the parameters all within the tolerance): no
    // element to name then.
    if (!o.largest_error.empty() && o.largest_rel_error > worst) {
      worst = o.largest_rel_error;
      d.largest = "rank " + std::to_string(o.rank) + ", " + o.largest_error;
    }
  }
  std::ostringstream os;
  os << "first divergence after step " << hi << " of " << spec.steps << ", on rank"
     << (d.ranks.size() == 1 ? " " : "s ");
  for (std::size_t i = 0; i < d.ranks.size() && i < 16; ++i) os << (i ? ", " : "") << d.ranks[i];
  if (d.ranks.size() > 16) os << ", … (" << d.ranks.size() << " ranks)";
  if (!d.largest.empty()) os << "; the largest error then: " << d.largest;
  else if (!first_why.empty()) os << "; then: " << first_why;
  out.mismatch = os.str() + "; at the end: " + out.mismatch;
}

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
  lo.device = opts.device;
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
  std::vector<std::string> messages, largests;
  std::vector<std::vector<std::int64_t>> reported;
  std::vector<std::vector<double>> all_losses;
  std::vector<std::string> layer_times;
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
    std::string why, largest;
    std::vector<std::int64_t> ranges;  // [begin, end) pairs of what it reported
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
        if (c.largest_rel_error > mine.largest_rel_error) {
          mine.largest_rel_error = c.largest_rel_error;
          largest = c.largest;
        }
        mine.max_abs_diff = std::max(mine.max_abs_diff, c.max_abs_diff);
        mine.compared += c.compared;
        ranges.push_back(begin);
        ranges.push_back(begin + static_cast<std::int64_t>(values.size()));
        losses = {};  // compared once
      }
    }
    auto s = allgather_results(comm, mine);
    auto t = allgather_results(comm, encode_times(*run.layer_times()));
    auto m = allgather_results(comm, why);
    auto g = allgather_results(comm, largest);
    auto c = allgather_results(comm, ranges);
    auto l = allgather_results(comm, std::vector<double>(run.losses()));
    std::lock_guard<std::mutex> lock(mutex);
    if (filled) return;
    filled = true;
    summaries = std::move(s);
    messages = std::move(m);
    largests = std::move(g);
    reported = std::move(c);
    all_losses = std::move(l);
    layer_times = std::move(t);
  });
  // On the mpi backend a process beyond the world ran no rank: it takes the
  // outcome from the processes that did (collective over the job, which runs
  // this same call on every process).
  if (const std::unique_ptr<Comm> job = process_comm(out.report.backend)) {
    const auto s = allgather_results(*job, summaries);
    const auto m = allgather_results(*job, messages);
    const auto g = allgather_results(*job, largests);
    const auto c = allgather_results(*job, reported);
    const auto l = allgather_results(*job, all_losses);
    const auto t = allgather_results(*job, layer_times);
    for (std::size_t p = 0; p < s.size() && !filled; ++p) {
      if (s[p].empty()) continue;
      summaries = s[p];
      messages = m[p];
      largests = g[p];
      reported = c[p];
      all_losses = l[p];
      layer_times = t[p];
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
      o.largest_error = largests[r];
      o.largest_rel_error = summaries[r].largest_rel_error;
      o.layer_times = decode_times(layer_times[r]);
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
  if (out.checked) check_coverage(out, spec, reported);
  if (out.checked && !out.matches && out.covered == out.model_elements && opts.locate_divergence &&
      spec.dtype == DType::kFloat64 && spec.steps > 1 && out.resumed_steps == 0)
    locate_divergence<T>(out, spec, opts, fn);
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
