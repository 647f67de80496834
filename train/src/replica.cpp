// Replica<T>: a rank's pieces of the flat buffers in Arrays, and the step.
#include "dtw/train/replica.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/kernels/optim.h"
#include "dtw/model/params.h"

namespace dtw::train {

using model::Unit;

namespace {

// "rank 3: " when the ledger knows the rank.
std::string rank_prefix(const Exec& exec) {
  if (exec.ledger() == nullptr || exec.ledger()->rank() < 0) return {};
  return "rank " + std::to_string(exec.ledger()->rank()) + ": ";
}

std::string describe(const std::vector<Range>& ranges) {
  if (ranges.empty()) return "nothing";
  std::ostringstream s;
  for (std::size_t i = 0; i < ranges.size(); ++i)
    s << (i ? " " : "") << "[" << ranges[i].begin << ", " << ranges[i].end << ")";
  return s.str();
}

// Where each held range starts in its Array.
struct Pieces {
  std::vector<Range> ranges;
  std::vector<std::int64_t> at;  // offset of ranges[i] in the Array
  std::int64_t total = 0;

  Pieces() = default;
  Pieces(const std::vector<Range>& rs, std::int64_t n, const char* what, const Exec& exec) {
    std::int64_t last_end = 0;
    for (const Range& r : rs) {
      DTW_CHECK_ARG(0 <= r.begin && r.begin <= r.end && r.end <= n,
                    rank_prefix(exec) << "Replica: " << what << " range [" << r.begin << ", "
                                      << r.end << ") is outside the model's [0, " << n << ")");
      DTW_CHECK_ARG(r.begin >= last_end, rank_prefix(exec)
                                             << "Replica: " << what << " ranges " << describe(rs)
                                             << " are not sorted and disjoint");
      last_end = r.end;
      if (r.size() == 0) continue;
      ranges.push_back(r);
      at.push_back(total);
      total += r.size();
    }
  }
  // Index of the piece that holds all of [begin, end), or -1.
  int find(std::int64_t begin, std::int64_t end) const {
    for (std::size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].begin <= begin && end <= ranges[i].end) return static_cast<int>(i);
    return -1;
  }
};

}  // namespace

ReplicaPlan ReplicaPlan::whole(const RunSpec& spec) {
  return range(0, model::param_layout(spec.config()).size());
}
ReplicaPlan ReplicaPlan::range(std::int64_t begin, std::int64_t end) {
  return ranges({{begin, end}});
}
ReplicaPlan ReplicaPlan::ranges(std::vector<Range> rs) { return {rs, rs, rs}; }
std::string ReplicaPlan::describe() const {
  return "params " + train::describe(params) + ", grads " + train::describe(grads) +
         ", optimizer " + train::describe(optimizer);
}

template <TrainElement T>
struct Replica<T>::State {
  // The replica's own buffers as a UnitAccess: a unit must be held whole,
  // except the embedding of a tied GPT, of which the head touches only wte.
  class OwnAccess final : public model::UnitAccess<T> {
   public:
    explicit OwnAccess(State& s) : s_(s) {}
    const T* params(int unit) override {
      return s_.params.data() + at(s_.param_pieces, unit, "parameters");
    }
    T* grads(int unit) override { return s_.grads.data() + at(s_.grad_pieces, unit, "gradients"); }

   private:
    std::int64_t at(const Pieces& pieces, int unit, const char* what) const {
      const Unit& u = s_.net->units()[static_cast<std::size_t>(unit)];
      std::int64_t end = u.end;
      if (unit == 0 && s_.tied_wte_end > 0 && pieces.find(u.begin, u.end) < 0) end = s_.tied_wte_end;
      const int i = pieces.find(u.begin, end);
      DTW_CHECK_ARG(i >= 0, rank_prefix(s_.exec)
                                << "Replica: a pass needs the " << what << " of unit " << u.name
                                << " [" << u.begin << ", " << u.end << "), but this replica holds "
                                << describe(pieces.ranges)
                                << " (pass a UnitAccess that supplies them)");
      return pieces.at[static_cast<std::size_t>(i)] + (u.begin - pieces.ranges[i].begin);
    }
    State& s_;
  };

  State(const RunSpec& spec, const Exec& e, const ReplicaPlan& plan)
      : exec(e), net(Network<T>::make(spec.config())), own(*this) {
    const std::int64_t n = net->layout().size();
    const model::ModelConfig& c = net->config();
    if (c.kind == model::ModelKind::kGpt && c.tied_head) {
      const model::ParamView& wte = net->layout().find("wte");
      tied_wte_end = wte.offset + wte.size;
    }
    param_pieces = Pieces(plan.params, n, "parameter", exec);
    grad_pieces = Pieces(plan.grads, n, "gradient", exec);
    opt_pieces = Pieces(plan.optimizer, n, "optimizer", exec);
    for (const Range& r : opt_pieces.ranges) {
      DTW_CHECK_ARG(param_pieces.find(r.begin, r.end) >= 0 && grad_pieces.find(r.begin, r.end) >= 0,
                    rank_prefix(exec) << "Replica: optimizer range [" << r.begin << ", " << r.end
                                      << ") is not inside one held parameter range and one held "
                                         "gradient range ("
                                      << plan.describe() << ")");
    }
    params = Array<T>(exec, param_pieces.total, MemoryCategory::kParameters);
    grads = Array<T>(exec, grad_pieces.total, MemoryCategory::kGradients);
    const bool adam = spec.optimizer == model::Optimizer::kAdamW;
    m = Array<T>(exec, opt_pieces.total, MemoryCategory::kOptimizerState);
    v = Array<T>(exec, adam ? opt_pieces.total : 0, MemoryCategory::kOptimizerState);
    grads.fill(T(0));
    m.fill(T(0));
    v.fill(T(0));
    // init_value is keyed by (seed, tensor, index): any piece initialises alone.
    for (std::size_t i = 0; i < param_pieces.ranges.size(); ++i) {
      const Range r = param_pieces.ranges[i];
      T* p = params.data() + param_pieces.at[i];
      for (const model::ParamView& view : net->layout().views()) {
        const std::int64_t lo = std::max(r.begin, view.offset);
        const std::int64_t hi = std::min(r.end, view.offset + view.size);
        for (std::int64_t k = lo; k < hi; ++k)
          p[k - r.begin] = static_cast<T>(model::init_value(view, spec.seed, k - view.offset));
      }
    }
  }

  Exec exec;
  std::unique_ptr<Network<T>> net;
  Pieces param_pieces, grad_pieces, opt_pieces;
  std::int64_t tied_wte_end = 0;  // end of wte when the head is tied, else 0
  Array<T> params, grads, m, v;
  OwnAccess own;
  // forward_backward's pass, kept so its buffers are reused from step to step
  // (like a caching allocator: the ledger counts them only while in use).
  std::unique_ptr<StagePass<T>> pass;
  model::LayerTimes* times = nullptr;
};

template <TrainElement T>
Replica<T>::Replica(const RunSpec& spec, const Exec& exec, ReplicaPlan plan)
    : spec_(spec), plan_(std::move(plan)), exec_(exec) {
  spec_.validate();
  DTW_CHECK_ARG(exec_.is_host(), rank_prefix(exec_) << "Replica: the model runs on the host; "
                                                    << exec_.describe() << " is not supported yet");
  state_ = std::make_unique<State>(spec_, exec_, plan_);
}
template <TrainElement T>
Replica<T>::Replica(Replica&&) noexcept = default;
template <TrainElement T>
Replica<T>& Replica<T>::operator=(Replica&&) noexcept = default;
template <TrainElement T>
Replica<T>::~Replica() = default;

template <TrainElement T>
const model::ParamLayout& Replica<T>::layout() const { return state_->net->layout(); }
template <TrainElement T>
const std::vector<Unit>& Replica<T>::units() const { return state_->net->units(); }
template <TrainElement T>
Network<T>& Replica<T>::network() { return *state_->net; }
template <TrainElement T>
std::int64_t Replica<T>::model_size() const { return layout().size(); }
template <TrainElement T>
model::UnitAccess<T>& Replica<T>::access() { return state_->own; }
template <TrainElement T>
void Replica<T>::set_times(model::LayerTimes* times) {
  state_->times = times;
  state_->net->set_times(times);
}

template <TrainElement T>
std::span<T> Replica<T>::params(std::int64_t begin, std::int64_t end) {
  const Pieces& p = state_->param_pieces;
  const int i = begin <= end ? p.find(begin, end) : -1;
  DTW_CHECK_ARG(i >= 0, rank_prefix(exec_) << "Replica::params: [" << begin << ", " << end
                                           << ") is not inside one held parameter range; held: "
                                           << describe(p.ranges));
  return state_->params.span().subspan(
      static_cast<std::size_t>(p.at[i] + begin - p.ranges[i].begin),
      static_cast<std::size_t>(end - begin));
}
template <TrainElement T>
std::span<T> Replica<T>::params() { return state_->params.span(); }

template <TrainElement T>
std::span<T> Replica<T>::grads(std::int64_t begin, std::int64_t end) {
  const Pieces& p = state_->grad_pieces;
  const int i = begin <= end ? p.find(begin, end) : -1;
  DTW_CHECK_ARG(i >= 0, rank_prefix(exec_) << "Replica::grads: [" << begin << ", " << end
                                           << ") is not inside one held gradient range; held: "
                                           << describe(p.ranges));
  return state_->grads.span().subspan(
      static_cast<std::size_t>(p.at[i] + begin - p.ranges[i].begin),
      static_cast<std::size_t>(end - begin));
}
template <TrainElement T>
std::span<T> Replica<T>::grads() { return state_->grads.span(); }

template <TrainElement T>
int Replica<T>::optimizer_moments() const {
  return spec_.optimizer == model::Optimizer::kAdamW ? 2 : 1;
}

template <TrainElement T>
std::span<T> Replica<T>::optimizer_state(int moment, std::int64_t begin, std::int64_t end) {
  DTW_CHECK_ARG(moment >= 0 && moment < optimizer_moments(),
                rank_prefix(exec_) << "Replica::optimizer_state: moment " << moment
                                   << " of an optimizer that keeps " << optimizer_moments());
  const Pieces& o = state_->opt_pieces;
  const int i = begin <= end ? o.find(begin, end) : -1;
  DTW_CHECK_ARG(i >= 0, rank_prefix(exec_) << "Replica::optimizer_state: [" << begin << ", " << end
                                           << ") is not inside one optimizer range; held: "
                                           << describe(o.ranges));
  Array<T>& moments = moment == 0 ? state_->m : state_->v;
  return moments.span().subspan(static_cast<std::size_t>(o.at[i] + begin - o.ranges[i].begin),
                                static_cast<std::size_t>(end - begin));
}

template <TrainElement T>
void Replica<T>::zero_grads() { state_->grads.fill(T(0)); }

template <TrainElement T>
void Replica<T>::scale_grads(T factor) {
  kernels::scale(state_->grads.data(), state_->grads.size(), factor);
}

template <TrainElement T>
double Replica<T>::forward_backward(std::int64_t step, std::int64_t shard, std::int64_t shards,
                                    T loss_scale, const model::GradReady& on_grad_ready,
                                    model::UnitAccess<T>* access) {
  DTW_CHECK_ARG(step >= 0, rank_prefix(exec_) << "Replica::forward_backward: step " << step
                                              << " must not be negative");
  const Batch batch = make_batch(spec_, step, shard, shards);
  if (!state_->pass) {
    state_->pass = std::make_unique<StagePass<T>>(*this);
    state_->pass->state_->keep_buffers = true;
    state_->pass->state_->owned.reset();
    state_->pass->state_->net = state_->net.get();
  }
  StagePass<T>& pass = *state_->pass;
  pass.state_->access = access != nullptr ? access : &state_->own;
  const T loss = pass.forward(state_->net->all(), batch);
  pass.backward({}, loss_scale, on_grad_ready);
  return static_cast<double>(loss);
}

template <TrainElement T>
Cost Replica<T>::pass_cost(model::UnitRange range, const Batch& batch, bool backward) {
  Network<T>& net = *state_->net;
  const double flops = net.forward_flops(range, batch);
  const double bytes = static_cast<double>(net.activation_bytes(range, batch));
  return backward ? Cost{3 * flops, 3 * bytes} : Cost{flops, bytes};
}

template <TrainElement T>
Cost Replica<T>::optimizer_cost() const {
  const double n = static_cast<double>(state_->opt_pieces.total) * sizeof(T);
  return {0, n * ((spec_.optimizer == model::Optimizer::kAdamW ? 7 : 4) + 2)};
}

template <TrainElement T>
double Replica<T>::local_sum_of_squares() {
  double sum = 0;
  const Pieces& o = state_->opt_pieces;
  for (const Range& r : o.ranges) {
    const std::span<T> g = grads(r);
    sum += kernels::sum_of_squares(g.data(), r.size());
  }
  return sum;
}

template <TrainElement T>
double Replica<T>::clip(double global_sum_of_squares) {
  DTW_CHECK_ARG(global_sum_of_squares >= 0 || std::isnan(global_sum_of_squares),
                rank_prefix(exec_) << "Replica::clip: sum of squares " << global_sum_of_squares
                                   << " is negative");
  const double norm = std::sqrt(global_sum_of_squares);
  // The reference's rule (kernels::clip_grad_norm), applied to this rank's part.
  if (spec_.clip_norm > 0 && norm > spec_.clip_norm) {
    const T factor = static_cast<T>(spec_.clip_norm / (norm + 1e-6));
    for (const Range& r : state_->opt_pieces.ranges) {
      const std::span<T> g = grads(r);
      kernels::scale(g.data(), r.size(), factor);
    }
  }
  return norm;
}

template <TrainElement T>
void Replica<T>::step(std::int64_t step) {
  DTW_CHECK_ARG(step >= 0, rank_prefix(exec_) << "Replica::step: step " << step
                                              << " must not be negative");
  const model::TrainOptions options = spec_.options();
  const Pieces& o = state_->opt_pieces;
  const bool adam = spec_.optimizer == model::Optimizer::kAdamW;
  for (std::size_t i = 0; i < o.ranges.size(); ++i) {
    const Range r = o.ranges[i];
    T* m = state_->m.data() + o.at[i];
    model::optimizer_step(layout(), options, step + 1, r.begin, r.end, params(r).data(),
                          grads(r).data(), m, adam ? state_->v.data() + o.at[i] : nullptr);
  }
  zero_grads();
}

// ---- StagePass ------------------------------------------------------------------

template <TrainElement T>
struct StagePass<T>::State {
  Replica<T>* replica;
  model::UnitAccess<T>* access;
  std::unique_ptr<Network<T>> owned;  // this pass's activations (none for the replica's own pass)
  Network<T>* net;
  MemoryLedger::Charge charge;
  std::vector<T> input_grad;
  bool forwarded = false;
  bool keep_buffers = false;  // the replica's own pass reuses its activation buffers
};

template <TrainElement T>
StagePass<T>::StagePass(Replica<T>& replica, model::UnitAccess<T>* access)
    : state_(std::make_unique<State>()) {
  state_->replica = &replica;
  state_->access = access != nullptr ? access : &replica.access();
  state_->owned = Network<T>::make(replica.network().config());
  state_->net = state_->owned.get();
  state_->net->set_times(replica.state_->times);
}
template <TrainElement T>
StagePass<T>::StagePass(StagePass&&) noexcept = default;
template <TrainElement T>
StagePass<T>::~StagePass() = default;

template <TrainElement T>
T StagePass<T>::forward(model::UnitRange range, const Batch& batch, std::span<const T> x_in) {
  State& s = *state_;
  const std::int64_t bytes = s.net->activation_bytes(range, batch);  // validates the range
  if (range.begin > 0) {
    const std::int64_t want = s.net->boundary_elements(range.begin, batch);
    DTW_CHECK_ARG(static_cast<std::int64_t>(x_in.size()) == want,
                  rank_prefix(s.replica->exec())
                      << "StagePass::forward: units [" << range.begin << ", " << range.end
                      << ") need an input activation of " << want << " elements, got "
                      << x_in.size());
  }
  s.charge.reset();
  s.charge = MemoryLedger::Charge(s.replica->exec().ledger(), MemoryCategory::kActivations, bytes);
  s.forwarded = false;
  const T loss = s.net->forward(*s.access, range, batch, x_in.empty() ? nullptr : x_in.data());
  s.forwarded = true;
  return loss;
}

template <TrainElement T>
void StagePass<T>::backward(std::span<const T> dx_out, T loss_scale,
                            const model::GradReady& on_grad_ready) {
  State& s = *state_;
  DTW_CHECK_ARG(s.forwarded, rank_prefix(s.replica->exec())
                                 << "StagePass::backward: no forward to differentiate");
  s.net->backward(*s.access, dx_out.empty() ? nullptr : dx_out.data(), loss_scale, on_grad_ready);
  const std::span<const T> g = s.net->input_grad();
  s.input_grad.assign(g.begin(), g.end());
  release();
}

template <TrainElement T>
std::span<const T> StagePass<T>::output() const { return state_->net->output(); }
template <TrainElement T>
std::span<const T> StagePass<T>::input_grad() const { return state_->input_grad; }

template <TrainElement T>
void StagePass<T>::release() {
  if (!state_->keep_buffers) state_->net->release_activations();
  state_->charge.reset();
  state_->forwarded = false;
}

template <TrainElement T>
std::int64_t StagePass<T>::charged_bytes() const { return state_->charge.bytes(); }

template class Replica<float>;
template class Replica<double>;
template class StagePass<float>;
template class StagePass<double>;

}  // namespace dtw::train
