// @given: not copied to labs/ (tools/gen-labs): its broken copies of this chapter's
// strategies would show the learner the loops the lab asks for.
//
// Two ZeRO bugs from the field, rebuilt on this chapter's pieces, broken on
// purpose. `dtw run pitfall NAME` runs them and the tests check that the
// workbench stops each one with a message that says what went wrong.
#include "dtw/errors.h"
#include "zero_run.h"

namespace dtw::ch04 {
namespace {

// The model's access, except that rank 1 runs block h.0 (unit 1) twice in
// the first forward: its parameters are gathered, used and released one more
// time than on every other rank.
template <class T>
class ExtraLayerOnRankOne final : public model::UnitAccess<T> {
 public:
  ExtraLayerOnRankOne(model::UnitAccess<T>& inner, int rank) : inner_(inner), rank_(rank) {}
  const T* params(int unit) override {
    if (rank_ == 1 && unit == 1 && !done_) {
      done_ = true;
      inner_.params(unit);  // "the loop ran once more here"
      inner_.release_params(unit);
    }
    return inner_.params(unit);
  }
  void release_params(int unit) override { inner_.release_params(unit); }
  T* grads(int unit) override { return inner_.grads(unit); }

 private:
  model::UnitAccess<T>& inner_;
  int rank_;
  bool done_ = false;
};

}  // namespace

template <TrainElement T>
void zero3_rank_runs_a_layer_twice(train::RankRun<T>& run) {
  ZeroRun<T> z(run, ZeroOptions::from_knobs(run.knobs(), 3));
  // What DTW_CHECK_COLLECTIVES=1 (or a debug build) does: every collective,
  // and every ZeRO-3 gather with its unit's name, is fingerprinted first.
  z.comm().set_verify_collectives(true);
  train::Replica<T> replica(z.spec(), run.exec(), z.plan());
  ShardedGrads<T> grads(z.comm(), z.sharding(), replica);
  GatheredParams<T> params(z.comm(), z.sharding(), replica);
  ZeroAccess<T> zero(replica, params, grads);
  ExtraLayerOnRankOne<T> access(zero, z.comm().rank());
  const model::GradReady ready = [&](std::int64_t b, std::int64_t e) { grads.ready(b, e); };
  for (std::int64_t step = 0; step < z.spec().steps; ++step) {
    const double loss = z.micro_batch(replica, step, 0, ready, &zero, &access);
    z.end_step(replica, step, loss);
  }
  z.finish(replica);
}

template <TrainElement T>
void zero2_reduces_before_accumulation_ends(train::RankRun<T>& run) {
  ZeroRun<T> z(run, ZeroOptions::from_knobs(run.knobs(), 2));
  DTW_CHECK_ARG(z.options().micro_batches >= 2,
                "zero2_reduces_before_accumulation_ends needs micro_batches >= 2, got "
                    << z.options().micro_batches);
  train::Replica<T> replica(z.spec(), run.exec(), z.plan());
  ShardedGrads<T> grads(z.comm(), z.sharding(), replica);
  ZeroAccess<T> access(replica, grads);
  bool dispatched = false;  // "this step's reduction has started"
  for (std::int64_t step = 0; step < z.spec().steps; ++step) {
    double loss = 0;
    for (int k = 0; k < z.options().micro_batches; ++k) {
      // THE BUG: the hook reduce-scatters on the first micro-batch, sets the
      // flag, and skips every later micro-batch of the step; their gradients
      // pile up in the unit buffers and are reduced, stale, a step later.
      const model::GradReady ready = [&](std::int64_t b, std::int64_t e) {
        if (!dispatched) grads.ready(b, e);
      };
      loss += z.micro_batch(replica, step, k, ready, &access);
      dispatched = true;
    }
    dispatched = false;  // reset at the step, as the original did
    z.end_step(replica, step, loss);
    allgather_params(z.comm(), z.sharding(), replica);
  }
  z.finish(replica);
}

#define DTW_INSTANTIATE(T)                                                     \
  template void zero3_rank_runs_a_layer_twice<T>(train::RankRun<T>&);          \
  template void zero2_reduces_before_accumulation_ends<T>(train::RankRun<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch04
