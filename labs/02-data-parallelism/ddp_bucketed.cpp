// DDP: data parallelism 1.1 with the gradient allreduce cut into buckets that
// run while backward computes (PyTorch's DistributedDataParallel).
//
// The step is dp_allreduce.cpp's, with one change: instead of one allreduce
// after backward, the replica's gradient-ready hook hands every finished
// range to a BucketReducer (buckets.cpp), which starts each bucket's
// allreduce the moment the bucket is complete; after backward the rank only
// waits for what is still in flight:
//
//     dp-allreduce:  [ forward ][ backward .............. ][ allreduce ΨΨΨΨΨΨ ][step]
//     ddp-bucketed:  [ forward ][ backward .............. ][ b3 ][step]
//                                     [ b0 ][ b1 ][ b2 ]         (under backward)
//
// Time per step, with T_ar(n) the allreduce of n bytes (chapter 01) and the
// buckets b_0 … b_{k−1} in ready order:
//
//     dp-allreduce:  T_fwd + T_bwd + T_ar(Ψe) + T_opt
//     ddp-bucketed:  T_fwd + max(T_bwd, time the first k−1 buckets need) + T_ar(b_{k−1}) + T_opt
//
// so at best everything but the last bucket is hidden. k buckets pay k·2(p−1)
// latencies instead of 2(p−1): too small a cap drowns in α, too large a cap
// leaves a big last bucket exposed (and starts the first one late) -- the
// U-shaped curve of step time against bucket size in the chapter's results.
//
// Bytes per step per rank: 2(p−1)/p·Ψe, exactly dp-allreduce's (each bucket
// is a ring allreduce of its range; a chunk of a small bucket rounds up by at
// most one element per rank).
#include <span>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "data_parallelism.h"
#include "nonblocking.h"  // chapter 01's solution: iallreduce

namespace dtw::ch02 {

template <TrainElement T>
void ddp_bucketed(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const DdpOptions options = check_ddp_run(run.knobs(), spec, p, r, false);
  check_same_run(comm, spec);
  const double weight = shard_weight(spec, r, p);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
  replica.set_times(run.layer_times());
  // The work of each compute phase, which the modeled fabric times on other devices.
  const train::Cost pass =
      replica.pass_cost(replica.network().all(), train::make_batch(spec, 0, r, p), true);
  const train::Cost update = replica.optimizer_cost();
  // The same layout and cap on every rank give the same buckets, so every
  // rank starts the same allreduces in the same order.
  BucketReducer<T> reducer(comm, replica,
                           make_buckets(replica.layout(), options.bucket_bytes, sizeof(T)));
  broadcast_parameters(comm, replica);  // 02.2: start equal, and check it

  // The timeline's phases (machinery, not the lesson): each runs its work
  // inside a named phase, with the work the modeled fabric times. What is
  // left to wait for after backward is the communication it could not hide.
  const auto computing = [&](auto work) {
    auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
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
    DTW_TODO("02.3: One step of DDP: backward hands every finished range to the reducer, the step waits only for what backward could not hide.");
    const std::int64_t done = step + 1;
    if (options.check_every > 0 && (done % options.check_every == 0 || done == spec.steps))
      check_replicas<T>(comm, replica.layout(), replica.params(), done);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template void ddp_bucketed<float>(train::RankRun<float>&);
template void ddp_bucketed<double>(train::RankRun<double>&);

}  // namespace dtw::ch02
