// ZeRO-3 / FSDP: shard the parameters too.
//
// ZeRO-2 still keeps every parameter on every rank, though a rank uses one
// unit at a time. ZeRO-3 keeps only its chunk of each unit and gathers the
// whole unit just before the unit runs, frees it just after:
//
//   forward:   gather embed · run · free │ gather h.0 · run · free │ ... │ gather head · run · free
//   backward:  gather head · run · free · RS head │ gather h.1 · run · free · RS h.1 │ ...
//
// (RS: ZeRO-2's reduce-scatter of the unit's gradient, unchanged.) Every
// parameter is gathered twice per step, once for the forward and once for
// the backward, and every gradient reduce-scattered once: 3Ψ(p−1)/p values
// per rank instead of 2Ψ(p−1)/p, 1.5× DDP's bytes, for memory 1/p of DDP's
// (plus the units in flight and the activations, which no stage shards).
//
// The model asks for a unit's parameters through model::UnitAccess: params(u)
// before it uses unit u, release_params(u) when done. That pair is where FSDP
// puts its pre-forward and post-forward hooks, and it is where this file
// gathers and frees. A GPT with a tied head borrows the embedding inside the
// head's pair, so at the head two units are whole at once.
//
// The gathers are collectives: every rank must ask for the same units in the
// same order. A model that runs a layer a different number of times on one
// rank (a data-dependent loop, early exit) breaks that, and a real run hangs
// (deepspeedai/DeepSpeed#7998). Here each gather first shares a fingerprint
// that names the unit, so with the collective check on, the ranks that
// disagree and the layers they asked for are named instead.
#include <string>

#include "gathered_unit.h"
#include "zero_run.h"

namespace dtw::ch04 {

template <TrainElement T>
GatheredParams<T>::GatheredParams(Comm& comm, const Sharding& sharding, train::Replica<T>& replica,
                                  int prefetch)
    : comm_(comm), sharding_(sharding), replica_(replica), depth_(prefetch) {
  DTW_CHECK_ARG(prefetch >= 0, "rank " << comm.rank() << ": ZeRO-3: prefetch depth " << prefetch
                                       << " must not be negative");
  for (std::size_t u = 0; u < sharding.units().size(); ++u) units_.push_back(std::make_unique<Unit>());
}

template <TrainElement T>
GatheredParams<T>::~GatheredParams() = default;

template <TrainElement T>
void GatheredParams<T>::begin_pass() {
  // The first pass has recorded the order in which the model asks for units.
  recorded_ = recorded_ || !order_.empty();
  position_ = 0;
  // Prefetch never looks past the end of a pass, so the last pass took all it started.
  for (const auto& unit : units_)
    DTW_CHECK(unit->gather == nullptr, ::dtw::Error,
              "rank " << comm_.rank()
                      << ": ZeRO-3: a prefetched gather was never taken in the last pass");
}

template <TrainElement T>
const T* GatheredParams<T>::params(int u) {
  Unit& unit = *units_.at(static_cast<std::size_t>(u));
  const int position = position_++;
  // Prefetch trusts the recorded order; a pass that departs from it would
  // leave gathers started for units it never takes (FSDP's forward prefetch
  // has the same condition: a static graph).
  if (depth_ > 0 && recorded_) {
    const auto name = [&](int v) { return sharding_.units()[static_cast<std::size_t>(v)].name; };
    const bool in_order = position < static_cast<int>(order_.size()) &&
                          order_[static_cast<std::size_t>(position)] == u;
    DTW_CHECK_ARG(in_order, "rank " << comm_.rank() << ": ZeRO-3 prefetch: call " << position
                                    << " of this pass asks for unit " << name(u)
                                    << ", but the first pass asked for "
                                    << (position < static_cast<int>(order_.size())
                                            ? name(order_[static_cast<std::size_t>(position)])
                                            : std::string("nothing more"))
                                    << " there; prefetch needs the same order in every pass");
  }
  // Let the gathers in flight move: on the threads backend only polls do.
  if (depth_ > 0) progress();
  if (depth_ > 0 && !recorded_) {
    DTW_TODO("04.4: The first pass records the order: append u to order_ (FSDP's recorded execution order).");
  }
  DTW_TODO("04.3: Make unit u whole for this caller: gather it unless some caller already holds it, and count the holder.");
  // Later passes start the gathers of the next units of the record (step 04.4).
  if (depth_ > 0 && recorded_) prefetch_after(position);
  return unit.copy.data();
}

template <TrainElement T>
void GatheredParams<T>::gather_now(int u) {
  const model::Unit& m = sharding_.units()[static_cast<std::size_t>(u)];
  const int r = comm_.rank();
  // The fingerprint names the unit: ranks about to gather different layers
  // (of equal size, which the allgather's own check cannot tell apart) fail
  // here, naming who asked for what, when the collective check is on.
  const std::string what = "zero3 gather " + m.name;
  comm_.verify_collective({.name = what.c_str(), .count = m.size(), .type = data_type_of<T>()});
  Unit& unit = *units_[static_cast<std::size_t>(u)];
  DTW_TODO("04.3: Gather unit u whole: a new Array (kParameters) of the unit's size, this rank's shard copied into its chunk, then an in-place allgather.");
}

template <TrainElement T>
void GatheredParams<T>::release(int u) {
  Unit& unit = *units_.at(static_cast<std::size_t>(u));
  DTW_CHECK_ARG(unit.holders > 0, "rank " << comm_.rank() << ": ZeRO-3: release of unit "
                                          << sharding_.units()[static_cast<std::size_t>(u)].name
                                          << ", which no pass holds");
  if (depth_ > 0) progress();
  DTW_TODO("04.3: One holder less; when the last holder releases the unit, free its copy.");
}

template <TrainElement T>
int GatheredParams<T>::live_units() const {
  int n = 0;
  for (const auto& unit : units_) n += unit->copy.empty() ? 0 : 1;
  return n;
}

template <class T>
void run_zero3(ZeroRun<T>& z) {
  const train::RunSpec& spec = z.spec();
  // Shards only: parameters, gradients and optimizer state of this rank's chunks.
  train::Replica<T> replica(spec, z.run().exec(), z.plan());
  replica.set_times(z.run().layer_times());
  DTW_TODO("04.3: Train every step the ZeRO-3 way: ZeRO-2's gradients, and parameters gathered unit by unit through a GatheredParams.");
  z.finish(replica);
}

template class GatheredParams<float>;
template class GatheredParams<double>;
template void run_zero3<float>(ZeroRun<float>&);
template void run_zero3<double>(ZeroRun<double>&);

}  // namespace dtw::ch04
