// DDP with gradient accumulation: m micro-batches per step, one allreduce.
//
// A step's batch is cut into p·m micro-batches; rank r runs m of them one
// after another, adding each one's (weighted) gradient into the same buffer
// -- the model's backward accumulates (+=), so this needs no extra memory --
// and only then sums over the ranks:
//
//     rank r:  [fwd+bwd mb 0][fwd+bwd mb 1] … [fwd+bwd mb m−1][wait][step]
//              no sync       no sync           buckets fire ▲
//                                              during this backward only
//
// Only the last micro-batch's backward gets the reducer's hook (PyTorch: all
// but the last inside `with model.no_sync():`). When its backward reports a
// range final, the range holds all m micro-batches' gradients, so each
// bucket is allreduced once, with the whole step's sum in it, still
// overlapped with that last backward.
//
// What it buys: the batch p·m·b (b rows per micro-batch) on p ranks that each
// fit only b rows of activations, and the same bytes per step as
// ddp-bucketed for m times the samples: per sample, communication falls by
// m. That is why the seeds recommend accumulation "if comms overhead is
// high": on a slow network, raise m until backward hides the allreduce.
// What it costs: the last micro-batch's backward is all there is to hide the
// allreduce under, 1/m of the step's compute.
//
// Syncing on another micro-batch (or on none) is the bug of the pitfalls
// (pitfalls.cpp): ranks then step with different gradients.
#include <span>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "data_parallelism.h"

namespace dtw::ch02 {

template <TrainElement T>
void ddp_accumulate(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const DdpOptions options = check_ddp_run(run.knobs(), spec, p, r, true);
  check_same_run(comm, spec);
  const std::int64_t m = options.micro_batches;
  // The batch cut into p·m shards: this rank's m of them.
  const std::vector<std::int64_t> shards = micro_batch_shards(spec, r, p, m);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
  replica.set_times(run.layer_times());
  // The work of each compute phase, which the modeled fabric times on other devices.
  std::vector<train::Cost> passes;
  for (const std::int64_t s : shards)
    passes.push_back(
        replica.pass_cost(replica.network().all(), train::make_batch(spec, 0, s, p * m), true));
  const train::Cost update = replica.optimizer_cost();
  BucketReducer<T> reducer(comm, replica,
                           make_buckets(replica.layout(), options.bucket_bytes, sizeof(T)));
  broadcast_parameters(comm, replica);

  // The timeline's phases (machinery, not the lesson): each runs its work
  // inside a named phase, with the work the modeled fabric times.
  const auto computing = [&](std::int64_t k, auto work) {
    const train::Cost& pass = passes[static_cast<std::size_t>(k)];
    auto phase =
        run.phase("forward-backward",
                  {.micro_batch = static_cast<int>(k), .flops = pass.flops, .bytes = pass.bytes});
    return work();
  };
  const auto waiting = [&](auto work) {
    auto phase = run.phase("wait-buckets", {.compute = false});
    return work();
  };
  const auto stepping = [&](auto work) {
    auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
    return work();
  };

  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    DTW_TODO("02.4: One step of m micro-batches: accumulate every micro-batch's weighted gradient, synchronise only during the last one's backward, then step.");
    const std::int64_t done = step + 1;
    if (options.check_every > 0 && (done % options.check_every == 0 || done == spec.steps))
      check_replicas<T>(comm, replica.layout(), replica.params(), done);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template void ddp_accumulate<float>(train::RankRun<float>&);
template void ddp_accumulate<double>(train::RankRun<double>&);

}  // namespace dtw::ch02
