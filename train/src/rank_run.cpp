// RankRun: one rank of a strategy run, what it records and reports.
#include "dtw/train/rank_run.h"

#include <cmath>
#include <utility>

#include "dtw/errors.h"
#include "dtw/kernels/vector.h"

namespace dtw::train {

template <TrainElement T>
RankRun<T>::RankRun(Comm& comm, RunSpec spec, Knobs knobs)
    : comm_(comm),
      spec_(std::move(spec)),
      knobs_(std::move(knobs)),
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
  // The first step's loss comes before any update, so no learning rate can
  // make it non-finite: then the forward read values never written.
  DTW_CHECK(std::isfinite(loss), Diverged,
            "the run diverged: loss " << loss << " at step " << step + 1 << " of " << spec_.steps
                                      << " (" << (spec_.optimizer == model::Optimizer::kAdamW ? "adamw" : "sgd") << " lr "
                                      << spec_.lr() << ", warm-up " << spec_.warmup_steps << " steps): "
                                      << (step == 0
                                              ? "before any optimizer step, so not the learning rate: "
                                                "the forward read values never written (a chunk of a "
                                                "gathered buffer left unfilled, a buffer read after it "
                                                "was freed, a wrong offset)"
                                              : "lower --lr or warm up longer; if the single-device "
                                                "run (--compare) does not diverge, look for values "
                                                "never written instead (an unfilled chunk, a freed "
                                                "buffer)"));
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
  // Read where the rank's memory is (its Exec's Place: a GPU's, or the host).
  reported_.emplace_back(begin, kernels::to_host(comm_.exec().place(), params));
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

template class RankRun<float>;
template class RankRun<double>;

}  // namespace dtw::train
