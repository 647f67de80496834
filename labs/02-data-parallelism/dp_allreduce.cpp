// Data parallelism 1.1: no server. Every rank keeps a whole replica -- the
// parameters, the gradients and the optimizer state -- and the ranks sum the
// gradients among themselves with an allreduce:
//
//     rank 0        rank 1        rank 2          every rank, every step:
//     θ,m,v         θ,m,v         θ,m,v           1. forward + backward on its shard
//       │             │             │                (gradient scaled by its weight)
//      g_0           g_1           g_2            2. allreduce: g ← g_0 + g_1 + g_2
//       └──── ring allreduce (chapter 01) ───┘    3. clip, optimizer step: identical
//      Σg            Σg            Σg                on every rank, so the replicas
//       │             │             │                stay equal without ever sending θ
//     θ',m',v'      θ',m',v'      θ',m',v'
//
// Cost per step: every rank sends and receives 2(p−1)/p·Ψe bytes (the ring;
// chapter 01), the same on every link, so no link is a bottleneck; time
//
//     T_allreduce ≈ 2(p−1)·α + 2(p−1)/p·Ψe·β + (p−1)/p·Ψe·γ
//
// hardly grows with p. Against the server (dp_server.cpp), the busiest link
// carries p/2 times less. The price is memory: p copies of the optimizer
// state (ZeRO, chapter 04, takes that back), and the duty to keep the copies
// equal, which nothing enforces by itself: hence the start from rank 0's
// parameters and the fingerprint check (replicas.cpp).
// What the tests count (tests/02-data-parallelism/dp_allreduce_test.cpp):
// the parameters and losses of 1-4 ranks against one device, to 1e-9; the
// bytes of the whole run, (p−1)·Ψ for the broadcast at the start and
// 2(p−1)·(Ψ + 1) per step (the gradients' ring and the loss's), every link
// of the ring carrying its share; and, in replica_check_test.cpp, that the
// start is rank 0's parameters and that a one-ulp change on one rank is
// named with its rank and tensor.
#include <span>

#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "data_parallelism.h"

namespace dtw::ch02 {

template <TrainElement T>
void dp_allreduce(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  const DdpOptions options = check_ddp_run(run.knobs(), spec, p, r, false);
  check_same_run(comm, spec);
  // The shard's share of the batch (02.5): computed before any message, so a
  // batch smaller than the world fails on every rank at once.
  const double weight = shard_weight(spec, r, p);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::whole(spec));
  replica.set_times(run.layer_times());
  // The work of each compute phase, which the modeled fabric times on other devices.
  const train::Cost pass =
      replica.pass_cost(replica.network().all(), train::make_batch(spec, 0, r, p), true);
  const train::Cost update = replica.optimizer_cost();
  broadcast_parameters(comm, replica);  // start equal, and check it

  // The timeline's phases (machinery, not the lesson): each runs its work
  // inside a named phase, with the work the modeled fabric times.
  const auto computing = [&](auto work) {
    auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
    return work();
  };
  const auto communicating = [&](auto work) {
    auto phase = run.phase("allreduce", {.compute = false});
    return work();
  };
  const auto stepping = [&](auto work) {
    auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
    return work();
  };

  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    DTW_TODO("02.2: One step of DP 1.1: the weighted gradient of this rank's shard, summed over the ranks, then the same optimizer step everywhere.");
    const std::int64_t done = step + 1;
    if (options.check_every > 0 && (done % options.check_every == 0 || done == spec.steps))
      check_replicas<T>(comm, replica.layout(), replica.params(), done);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template void dp_allreduce<float>(train::RankRun<float>&);
template void dp_allreduce<double>(train::RankRun<double>&);

}  // namespace dtw::ch02
