// ZeroAccess: how the model reaches a ZeRO rank's parameters and gradients,
// and where the timeline's compute phases begin and end. Not a lab step.
//
// The model asks for unit u's parameters before it computes with them and
// releases them after: between the two is unit u's compute. A gather (or the
// wait for a prefetched one) happens inside params(), before the compute, so
// each phase opens when params() has its parameters and closes at release.
// The modeled fabric then sees every blocking gather and reduce-scatter
// outside compute, as it is, and a prefetch posted during a phase as
// overlapped with it.
//
// Which pass a call belongs to: a unit's first params() of a pass is its
// forward, the next its backward. A GPT with a tied head borrows the
// embedding inside the head's calls; those borrows carry no compute of
// their own (the head's phase, opened next, carries it).
#include <optional>
#include <string>

#include "zero.h"

namespace dtw::ch04 {

template <TrainElement T>
struct ZeroAccess<T>::Phases {
  train::RankRun<T>* run = nullptr;
  int micro_batch = -1;
  bool tied = false;
  std::vector<train::Cost> forward, backward;  // per unit, for this pass's rows
  std::int64_t rows = -1;                      // the rows the costs are for
  std::vector<int> seen;                       // params() calls per unit in this pass
  std::optional<Tracer::Phase> open;
};

template <TrainElement T>
ZeroAccess<T>::ZeroAccess(train::Replica<T>& replica, ShardedGrads<T>& grads)
    : replica_(replica), grads_(grads), phases_(std::make_unique<Phases>()) {}

template <TrainElement T>
ZeroAccess<T>::ZeroAccess(train::Replica<T>& replica, GatheredParams<T>& params,
                          ShardedGrads<T>& grads)
    : replica_(replica), gathered_(&params), grads_(grads), phases_(std::make_unique<Phases>()) {}

template <TrainElement T>
ZeroAccess<T>::~ZeroAccess() = default;

template <TrainElement T>
void ZeroAccess<T>::begin_pass(train::RankRun<T>* run, const train::Batch& batch, int micro_batch) {
  Phases& ph = *phases_;
  ph.open.reset();
  ph.run = run;
  ph.micro_batch = micro_batch;
  const std::size_t n = replica_.units().size();
  const model::ModelConfig& c = replica_.network().config();
  ph.tied = model::head_is_tied(c);
  ph.seen.assign(n, 0);
  if (ph.rows != batch.rows) {  // micro-batches of one rank may differ by a row
    ph.rows = batch.rows;
    ph.forward.resize(n);
    ph.backward.resize(n);
    for (std::size_t u = 0; u < n; ++u) {
      const model::UnitRange one{static_cast<int>(u), static_cast<int>(u) + 1};
      ph.forward[u] = replica_.pass_cost(one, batch, false);
      const train::Cost both = replica_.pass_cost(one, batch, true);
      ph.backward[u] = {both.flops - ph.forward[u].flops, both.bytes - ph.forward[u].bytes};
    }
  }
  if (gathered_ != nullptr) gathered_->begin_pass();
}

template <TrainElement T>
const T* ZeroAccess<T>::params(int unit) {
  Phases& ph = *phases_;
  ph.open.reset();  // gathering is not computing
  const model::Unit& u = replica_.units()[static_cast<std::size_t>(unit)];
  const T* p = gathered_ != nullptr ? gathered_->params(unit) : replica_.params(u.begin, u.end).data();
  const int seen = ph.seen.empty() ? 0 : ph.seen[static_cast<std::size_t>(unit)]++;
  const bool borrowed = ph.tied && unit == 0 && seen > 0;  // the head's phase comes next
  if (ph.run != nullptr && !ph.seen.empty() && !borrowed) {
    const train::Cost cost = seen == 0 ? ph.forward[static_cast<std::size_t>(unit)]
                                       : ph.backward[static_cast<std::size_t>(unit)];
    ph.open.emplace(ph.run->comm().tracer(), (seen == 0 ? "forward " : "backward ") + u.name,
                    PhaseMeta{true, -1, ph.micro_batch, cost.flops, cost.bytes});
  }
  return p;
}

template <TrainElement T>
void ZeroAccess<T>::release_params(int unit) {
  phases_->open.reset();
  if (gathered_ != nullptr) gathered_->release(unit);
}

template class ZeroAccess<float>;
template class ZeroAccess<double>;

}  // namespace dtw::ch04
