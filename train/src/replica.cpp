// Replica<T>: a rank's pieces of the flat buffers in Arrays, and the step.
#include "dtw/train/replica.h"

#include "replica_state.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/kernels/optim.h"
#include "dtw/kernels/permute.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/params.h"
#include "dtw/train/sequence_batch.h"

namespace dtw::train {

using model::Unit;
using detail::describe;
using detail::Pieces;
using detail::rank_prefix;


ReplicaPlan ReplicaPlan::whole(const RunSpec& spec) {
  return range(0, model::param_layout(spec.config()).size());
}
ReplicaPlan ReplicaPlan::range(std::int64_t begin, std::int64_t end) {
  return ranges({{begin, end}});
}
ReplicaPlan ReplicaPlan::ranges(std::vector<Range> rs) { return {rs, rs, rs}; }
std::string ReplicaPlan::describe() const {
  return "params " + detail::describe(params) + ", grads " + detail::describe(grads) +
         ", optimizer " + detail::describe(optimizer);
}

template <TrainElement T>
Replica<T>::Replica(const RunSpec& spec, const Exec& exec, ReplicaPlan plan)
    : spec_(spec), plan_(std::move(plan)), exec_(exec) {
  spec_.validate();
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
  kernels::scale(exec_.place(), state_->grads.data(), state_->grads.size(), factor);
}

template <TrainElement T>
double Replica<T>::forward_backward(std::int64_t step, std::int64_t shard, std::int64_t shards,
                                    T loss_scale, const model::GradReady& on_grad_ready,
                                    model::UnitAccess<T>* access) {
  DTW_CHECK_ARG(step >= 0, rank_prefix(exec_) << "Replica::forward_backward: step " << step
                                              << " must not be negative");
  Batch batch = make_batch(spec_, step, shard, shards);
  // A sequence shard is given its tokens, unless its seams cut the whole
  // sequence themselves (Megatron-SP's vocabulary-parallel ends).
  if (plan_.shard.sequence_shards > 1 && !plan_.shard.cut_by_seams)
    batch = sequence_shard_of(batch, plan_.shard);
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
  const Replication& rep = plan_.replicated;
  for (const Range& r : o.ranges) {
    if (rep.tensors.empty() || rep.group_rank == 0) {
      const std::span<T> g = grads(r);
      sum += kernels::sum_of_squares(exec_.place(), g.data(), r.size());
      continue;
    }
    // A replicated tensor is counted by its group's first member only, so the
    // allreduce over the group counts each of its elements once (the field's
    // bug: clip_grad_norm counting it once per tensor-parallel rank).
    for (const model::ParamView& v : layout().views()) {
      const std::int64_t lo = std::max(r.begin, v.offset), hi = std::min(r.end, v.offset + v.size);
      if (lo >= hi || rep.holds(v.name)) continue;
      const std::span<T> g = grads(lo, hi);
      sum += kernels::sum_of_squares(exec_.place(), g.data(), hi - lo);
    }
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
      kernels::scale(exec_.place(), g.data(), r.size(), factor);
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
                          grads(r).data(), m, adam ? state_->v.data() + o.at[i] : nullptr,
                          exec_.place());
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
  kernels::Vector<T> input_grad;  // on the replica's Place
  bool forwarded = false;
  bool keep_buffers = false;  // the replica's own pass reuses its activation buffers
};

template <TrainElement T>
StagePass<T>::StagePass(Replica<T>& replica, model::UnitAccess<T>* access)
    : state_(std::make_unique<State>()) {
  state_->replica = &replica;
  state_->access = access != nullptr ? access : &replica.access();
  state_->owned = Network<T>::make(replica.network().config(), replica.network().shard());
  state_->net = state_->owned.get();
  state_->net->set_place(replica.exec().place());
  state_->net->set_times(replica.state_->times);
  state_->net->set_seams(replica.state_->seams);
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
  const kernels::Place at = s.replica->exec().place();
  s.input_grad.set_place(at);
  s.input_grad.resize(g.size());
  kernels::copy_values(at, s.input_grad.data(), g.data(), static_cast<std::int64_t>(g.size()));
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
