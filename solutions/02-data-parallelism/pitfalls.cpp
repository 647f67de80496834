// @given: not copied to labs/ (tools/gen-labs): its broken copies of this chapter's
// strategies would show the learner the loops the lab asks for.
//
// Broken on purpose: bugs from the field, each one of this chapter's
// strategies with one thing done wrong, and what catches it. `dtw run pitfall
// NAME` runs them; tests/02-data-parallelism/pitfalls_test.cpp checks that
// the workbench stops each one with a message naming what went wrong.
//
// None of them crashes or hangs on its own. The first three leave the ranks
// with different models -- the replicas' fingerprints (replicas.cpp) catch
// that at the next check; the last one leaves every rank with the *same*
// wrong model, which only the comparison with the reference can see.
#include <span>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "data_parallelism.h"

namespace dtw::ch02::pitfalls {
namespace {

// ddp_accumulate.cpp with the decision "does micro-batch k sync?" taken by
// `syncs(k, m)`, a stateful callable: the two accumulation bugs differ only there.
template <class T, class Syncs>
void accumulate_with(train::RankRun<T>& run, Syncs syncs) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const DdpOptions options = ddp_options(run.knobs(), spec, r);
  const std::int64_t m = options.micro_batches;
  const std::vector<std::int64_t> shards = micro_batch_shards(spec, r, p, m);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
  BucketReducer<T> reducer(comm, replica,
                           make_buckets(replica.layout(), options.bucket_bytes, sizeof(T)));
  broadcast_parameters(comm, replica);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    for (std::int64_t k = 0; k < m; ++k) {
      const std::size_t i = static_cast<std::size_t>(k);
      const double w = shard_weight(spec, shards[i], p * m);
      const bool sync = syncs(k, m);
      loss += w * replica.forward_backward(step, shards[i], p * m, static_cast<T>(w),
                                           sync ? reducer.hook() : model::GradReady{});
      // As PyTorch's reducer does at the end of every backward that synced:
      // wait for its buckets before the next micro-batch adds into the same
      // gradients (a ring still in flight would otherwise sum those too).
      if (sync) reducer.finish();
    }
    ch01::allreduce(comm, std::span<double>(&loss, 1), ReduceOp::kSum);
    replica.clip(replica.local_sum_of_squares());
    replica.step(step);
    check_replicas<T>(comm, replica.layout(), replica.params(), step + 1);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

// dp_allreduce.cpp with the start and the weights as parameters.
template <class T, class Start, class Weight>
void allreduce_with(train::RankRun<T>& run, Start start, Weight weight_of) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const double weight = weight_of(spec, r, p);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
  start(comm, replica);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = weight * replica.forward_backward(step, r, p, static_cast<T>(weight));
    ch01::allreduce(comm, replica.grads(), ReduceOp::kSum);
    ch01::allreduce(comm, std::span<double>(&loss, 1), ReduceOp::kSum);
    replica.clip(replica.local_sum_of_squares());
    replica.step(step);
    check_replicas<T>(comm, replica.layout(), replica.params(), step + 1);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

}  // namespace

// modelscope/FunASR#3472: `if batch_idx % accum_grad != 0: with no_sync()`
// synchronised the first micro-batch of every step and skipped the one
// before the optimizer step. Rank-local gradients of micro-batches 1 … m−1
// stay on their rank; every rank steps with a different sum.
template <TrainElement T>
void sync_on_first_micro_batch(train::RankRun<T>& run) {
  accumulate_with(run,
                  [](std::int64_t k, std::int64_t /*m*/) { return k == 0; });  // BUG: k + 1 == m
}

// karpathy/build-nanogpt#30: `model.require_backward_grad_sync = (micro_step
// == last)` was set after the forward, before the backward. PyTorch's DDP
// reads the flag when the forward starts, so the last micro-batch ran with
// the flag of the one before it (false), and the first of the next step with
// true: only micro-batch 0 ever synchronised. Here the flag is read when the
// micro-batch starts, and set after, exactly as in the bug.
template <TrainElement T>
void sync_flag_set_after_forward(train::RankRun<T>& run) {
  bool require_sync = true;  // DDP's default before the first micro-batch
  accumulate_with(run, [require_sync](std::int64_t k, std::int64_t m) mutable {
    const bool armed = require_sync;  // what "the forward" saw
    require_sync = k + 1 == m;        // BUG: set after the forward it was meant for
    return armed;
  });
}

// Each process seeds its own weights (no shared seed, or a checkpoint loaded
// on rank 0 only) and nobody broadcasts rank 0's: every replica trains its own
// model from the first step. The check at the start names the first rank.
template <TrainElement T>
void skip_initial_broadcast(train::RankRun<T>& run) {
  allreduce_with(
      run,
      [&run](Comm& comm, train::Replica<T>& replica) {
        // Initialise as a process with the seed `seed + rank` would.
        const std::span<T> params = replica.params();
        for (const model::ParamView& view : replica.layout().views())
          for (std::int64_t i = 0; i < view.size; ++i)
            params[static_cast<std::size_t>(view.offset + i)] = static_cast<T>(model::init_value(
                view, run.spec().seed + static_cast<std::uint64_t>(comm.rank()), i));
        // BUG: no ch01::broadcast(comm, replica.params(), 0) here.
        check_replicas<T>(comm, replica.layout(), replica.params(), 0);
      },
      shard_weight);
}

// PyTorch's DDP averages by the world size. With a batch that does not divide
// (12 rows on 5 ranks: 3, 3, 2, 2, 2) the ranks with fewer rows weigh too much:
// all replicas agree -- the fingerprints cannot see it -- and all are wrong.
template <TrainElement T>
void average_by_world_size(train::RankRun<T>& run) {
  allreduce_with(
      run, [](Comm& comm, train::Replica<T>& replica) { broadcast_parameters(comm, replica); },
      [](const train::RunSpec& spec, int r, int p) {
        (void)train::shard_rows(spec, r, p);
        return 1.0 / p;  // BUG: shard_weight(spec, r, p)
      });
}

#define DTW_CH02_INSTANTIATE(T)                                     \
  template void sync_on_first_micro_batch<T>(train::RankRun<T>&);   \
  template void sync_flag_set_after_forward<T>(train::RankRun<T>&); \
  template void skip_initial_broadcast<T>(train::RankRun<T>&);      \
  template void average_by_world_size<T>(train::RankRun<T>&);
DTW_CH02_INSTANTIATE(float)
DTW_CH02_INSTANTIATE(double)
#undef DTW_CH02_INSTANTIATE

}  // namespace dtw::ch02::pitfalls
