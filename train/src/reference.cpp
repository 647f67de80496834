// The reference run (train_reference on a Replica), its memo, and the comparison.
#include "dtw/train/reference.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/kernels/optim.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/trainer.h"
#include "reference_work.h"

namespace dtw::train {
namespace {

constexpr std::int64_t kKeepAllLimit = std::int64_t{1} << 24;  // values kept per reference

// The reference loop: a Replica over the whole model with one shard.
// `keep` says after which step counts to keep the parameters.
template <class T>
model::TrainResult<T> run_reference(const RunSpec& spec, model::LayerTimes* times,
                                    const std::function<void(const model::StepInfo&)>& on_step,
                                    std::vector<std::vector<T>>* kept) {
  Replica<T> replica(spec, Exec::host(), ReplicaPlan::whole(spec));
  replica.set_times(times);
  const std::int64_t tokens = spec.tokens_per_step();
  model::TrainResult<T> result;
  result.layout = replica.layout();
  const bool keep_all =
      kept != nullptr && replica.model_size() * (spec.steps + 1) <= kKeepAllLimit;
  auto keep = [&](std::int64_t k) {
    if (kept == nullptr) return;
    kept->resize(static_cast<std::size_t>(spec.steps + 1));
    if (keep_all || k == 0 || k == spec.steps) {
      (*kept)[static_cast<std::size_t>(k)] =
          kernels::to_host(replica.exec().place(), std::span<const T>(replica.params()));
    }
  };
  keep(0);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const double loss = replica.forward_backward(step, 0, 1);
    double norm = 0;
    {
      model::ScopedLayerTimer timer(times, "optimizer");
      norm = replica.clip(replica.local_sum_of_squares());
      replica.step(step);  // also zeroes the gradients for the next step
    }
    result.losses.push_back(loss);
    keep(step + 1);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (on_step) on_step({step, loss, norm, tokens, took.count()});
  }
  result.params = kernels::to_host(replica.exec().place(), std::span<const T>(replica.params()));
  return result;
}

// A process-wide memo: one computation per key, waited for by every caller.
template <class V>
class Memo {
 public:
  template <class F>
  std::shared_ptr<const V> get(const std::string& key, F compute) {
    std::shared_future<std::shared_ptr<const V>> future;
    std::promise<std::shared_ptr<const V>> promise;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it == entries_.end()) {
        future = promise.get_future().share();
        entries_.emplace(key, future);
        mine = true;
      } else {
        future = it->second;
      }
    }
    if (mine) {
      try {
        promise.set_value(std::make_shared<const V>(compute()));
      } catch (...) {
        promise.set_exception(std::current_exception());
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.erase(key);  // a later call may try again (and fail the same way)
      }
    }
    return future.get();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const V>>> entries_;
};

template <class T>
Memo<ReferenceRun<T>>& run_memo() {
  static Memo<ReferenceRun<T>> memo;
  return memo;
}

std::atomic<std::int64_t> g_scales_computed{0};

// Per tensor (in layout.views() order), its scale after `steps_done` steps:
// the RMS of its expected values. Memoised beside the run, so a rank that
// reports a tensor a row at a time costs one pass over it, not one per row.
template <class T>
std::shared_ptr<const std::vector<double>> reference_scales(const RunSpec& spec,
                                                            std::int64_t steps_done) {
  static Memo<std::vector<double>> memo;
  RunSpec s = spec;
  s.dtype = dtype_of<T>();
  return memo.get(s.describe() + " after " + std::to_string(steps_done), [&] {
    const std::shared_ptr<const ReferenceRun<T>> run = reference_run<T>(spec);
    const std::shared_ptr<const std::vector<T>> ref = reference_params<T>(spec, steps_done);
    std::vector<double> scales;
    for (const model::ParamView& v : run->layout.views()) {
      double sq = 0;
      for (std::int64_t i = v.offset; i < v.offset + v.size; ++i)
        sq += static_cast<double>((*ref)[i]) * static_cast<double>((*ref)[i]);
      scales.push_back(std::max(std::sqrt(sq / static_cast<double>(v.size)), 1e-30));
      g_scales_computed.fetch_add(1, std::memory_order_relaxed);
    }
    return scales;
  });
}

}  // namespace

std::string element_name(const model::ParamLayout& layout, std::int64_t flat) {
  for (const model::ParamView& v : layout.views()) {
    if (flat < v.offset || flat >= v.offset + v.size) continue;
    const std::int64_t i = flat - v.offset;
    std::ostringstream s;
    s << v.name << "[" << i << "]";
    if (v.shape.size() == 2) s << " (row " << i / v.shape[1] << ", col " << i % v.shape[1] << ")";
    return s.str();
  }
  return "element " + std::to_string(flat);
}


std::int64_t reference_scales_computed() { return g_scales_computed.load(); }

template <TrainElement T>
std::shared_ptr<const ReferenceRun<T>> reference_run(const RunSpec& spec) {
  RunSpec s = spec;
  s.dtype = dtype_of<T>();
  return run_memo<T>().get(s.describe(), [&] {
    ReferenceRun<T> run;
    model::TrainResult<T> r = run_reference<T>(s, nullptr, {}, &run.params);
    run.losses = std::move(r.losses);
    run.layout = std::move(r.layout);
    return run;
  });
}

template <TrainElement T>
std::shared_ptr<const std::vector<T>> reference_params(const RunSpec& spec,
                                                       std::int64_t steps_done) {
  DTW_CHECK_ARG(0 <= steps_done && steps_done <= spec.steps,
                "reference_params: " << steps_done << " steps done is outside [0, steps "
                                     << spec.steps << "]");
  std::shared_ptr<const ReferenceRun<T>> run = reference_run<T>(spec);
  const auto& kept = run->params[static_cast<std::size_t>(steps_done)];
  if (kept.empty()) {  // a large run keeps only its ends: rerun the prefix
    RunSpec shorter = spec;
    shorter.steps = steps_done;
    run = reference_run<T>(shorter);
    return {run, &run->params.back()};
  }
  return {run, &kept};
}

template <TrainElement T>
ReferenceCheck compare_to_reference(int rank, const RunSpec& spec, std::span<const double> losses,
                                    std::span<const T> params, std::int64_t begin,
                                    double tolerance, std::int64_t steps_done) {
  if (steps_done < 0) steps_done = static_cast<std::int64_t>(losses.size());
  DTW_CHECK_ARG(tolerance >= 0, "compare_to_reference: tolerance " << tolerance << " is negative");
  DTW_CHECK_ARG(static_cast<std::int64_t>(losses.size()) <= steps_done,
                "compare_to_reference: rank " << rank << " gave " << losses.size()
                                              << " losses for " << steps_done << " steps");
  const std::shared_ptr<const ReferenceRun<T>> run = reference_run<T>(spec);
  const std::int64_t n = run->layout.size();
  const std::int64_t count = static_cast<std::int64_t>(params.size());
  DTW_CHECK_ARG(begin >= 0 && begin + count <= n,
                "compare_to_reference: rank " << rank << " compares [" << begin << ", "
                                              << begin + count << "), outside the model's [0, "
                                              << n << ")");
  ReferenceCheck check;
  // The first divergent parameter (in layer order) is the message; a loss
  // that diverged too is added (it names the first step that went wrong).
  std::string param_why, loss_why;
  auto say = [&](std::string& into, const std::string& what, double expected, double got,
                 double rel) {
    if (!into.empty()) return;
    std::ostringstream s;
    s.precision(17);
    s << what << ": expected " << expected << ", got " << got << ", relative error " << rel
      << " > tolerance " << tolerance;
    into = s.str();
  };
  for (std::size_t s = 0; s < losses.size(); ++s) {
    const double e = run->losses[s], g = losses[s];
    const double rel = std::abs(g - e) / std::max(std::abs(e), 1e-30);
    check.max_rel_error = std::max(check.max_rel_error, std::isnan(rel) ? INFINITY : rel);
    if (!(rel <= tolerance) && loss_why.empty() && e != 0 && std::isfinite(g / e)) {
      // The ratio first: a gradient p or m times too big (a missing 1/p or
      // 1/m) reads at once as "loss ×2.000", not as a tolerance problem.
      std::ostringstream ratio;
      ratio.precision(4);
      ratio << std::fixed << g / e;
      say(loss_why, "step " + std::to_string(s) + ": loss ×" + ratio.str() + " the reference's", e, g,
          rel);
    } else if (!(rel <= tolerance)) {
      say(loss_why, "step " + std::to_string(s) + ": loss", e, g, rel);
    }
  }
  const std::shared_ptr<const std::vector<T>> ref = reference_params<T>(spec, steps_done);
  const bool judge_params = dtype_of<T>() == DType::kFloat64;
  // Computed only when parameters are compared (a losses-only check needs none).
  std::shared_ptr<const std::vector<double>> scales;
  const std::vector<model::ParamView>& views = run->layout.views();
  for (std::size_t t = 0; t < views.size() && count > 0; ++t) {
    const model::ParamView& v = views[t];
    const std::int64_t lo = std::max(begin, v.offset), hi = std::min(begin + count, v.offset + v.size);
    if (lo >= hi) continue;
    if (!scales) scales = reference_scales<T>(spec, steps_done);
    const double scale = (*scales)[t];  // the tensor's: RMS of its expected values
    for (std::int64_t i = lo; i < hi; ++i) {
      const double e = static_cast<double>((*ref)[i]), g = static_cast<double>(params[i - begin]);
      const double diff = std::abs(g - e), rel = diff / std::max(std::abs(e), scale);
      check.max_abs_diff = std::max(check.max_abs_diff, std::isnan(diff) ? INFINITY : diff);
      check.max_rel_error = std::max(check.max_rel_error, std::isnan(rel) ? INFINITY : rel);
      if (judge_params && !(rel <= tolerance)) {
        const std::string what = "after " + std::to_string(steps_done) + " steps: " +
                                 element_name(run->layout, i) + " (flat index " +
                                 std::to_string(i) + ")";
        say(param_why, what, e, g, rel);
        // The largest error, not only the first in layer order: after an
        // allreduce spread a bad element everywhere, it is where it began.
        if (!(rel <= check.largest_rel_error)) {
          check.largest_rel_error = std::isnan(rel) ? INFINITY : rel;
          check.largest.clear();
          say(check.largest, what, e, g, rel);
        }
      }
    }
  }
  check.compared = count;
  check.ok = param_why.empty() && loss_why.empty();
  if (!check.ok) {
    const std::string who = "rank " + std::to_string(rank) + ", ";
    // A loss that diverged comes first: it names the first step that went
    // wrong and, by its ratio, often the bug; the first parameter follows.
    check.message = loss_why.empty()    ? who + param_why
                    : param_why.empty() ? who + loss_why
                                        : who + loss_why + " (parameters: " + param_why + ")";
  }
  return check;
}

template <TrainElement T>
ReferenceCheck compare_to_reference(int rank, Replica<T>& replica, std::span<const double> losses,
                                    std::int64_t steps_done) {
  ReferenceCheck all;
  // Every piece after the same steps (losses are compared with the first only).
  if (steps_done < 0) steps_done = static_cast<std::int64_t>(losses.size());
  // At the whole model's offsets: a shard's slices are placed through their views.
  for (const auto& [begin, piece] : replica.whole_params()) {
    // Read where the replica lives (a GPU's memory, or the host's).
    const std::vector<T> p = kernels::to_host(replica.exec().place(), piece);
    ReferenceCheck c = compare_to_reference<T>(rank, replica.spec(), losses, std::span<const T>(p),
                                               begin, default_tolerance(dtype_of<T>()), steps_done);
    if (all.ok && !c.ok) {
      all.ok = false;
      all.message = c.message;
    }
    if (c.largest_rel_error > all.largest_rel_error) {
      all.largest_rel_error = c.largest_rel_error;
      all.largest = c.largest;
    }
    all.max_abs_diff = std::max(all.max_abs_diff, c.max_abs_diff);
    all.max_rel_error = std::max(all.max_rel_error, c.max_rel_error);
    all.compared += c.compared;
    losses = {};  // compared once
  }
  return all;
}

#define DTW_INSTANTIATE(T)                                                                     \
  template std::shared_ptr<const ReferenceRun<T>> reference_run<T>(const RunSpec&);            \
  template std::shared_ptr<const std::vector<T>> reference_params<T>(const RunSpec&,           \
                                                                     std::int64_t);            \
  template ReferenceCheck compare_to_reference<T>(int, const RunSpec&, std::span<const double>, \
                                                  std::span<const T>, std::int64_t, double,    \
                                                  std::int64_t);                               \
  template ReferenceCheck compare_to_reference<T>(int, Replica<T>&, std::span<const double>,   \
                                                  std::int64_t);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::train

namespace dtw::model {

// Declared in dtw/model/trainer.h (the model's unit tests call it there); it
// lives here because the reference is the training layer's Replica over the
// whole model with one shard.
template <TrainElement T>
TrainResult<T> train_reference(const ModelConfig& config, std::int64_t steps,
                               const TrainOptions& options) {
  DTW_CHECK_ARG(steps >= 0, "train_reference: steps " << steps << " must not be negative");
  DTW_CHECK_ARG(options.batch >= 1,
                "train_reference: batch " << options.batch << " must be at least 1");
  DTW_CHECK_ARG(options.warmup_steps >= 0, "train_reference: warmup_steps "
                                                << options.warmup_steps << " must not be negative");
  DTW_CHECK_ARG(options.clip_norm >= 0,
                "train_reference: clip_norm " << options.clip_norm << " must not be negative");
  validate(config);
  if (config.kind == ModelKind::kGpt) {
    DTW_CHECK_ARG(options.seq_len >= 0 && options.seq_len <= config.context,
                  "train_reference: seq_len " << options.seq_len << " is outside [0, context "
                                              << config.context << "] of model " << config.name);
  }
  const train::RunSpec spec =
      train::run_from_options(config, steps, options, train::dtype_of<T>());
  return train::run_reference<T>(spec, options.times, options.on_step, nullptr);
}

template TrainResult<float> train_reference<float>(const ModelConfig&, std::int64_t,
                                                   const TrainOptions&);
template TrainResult<double> train_reference<double>(const ModelConfig&, std::int64_t,
                                                     const TrainOptions&);

}  // namespace dtw::model
