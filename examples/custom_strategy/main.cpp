// A training strategy written outside dtw: data parallelism whose gradients
// are summed with chapter 01's allreduce (the algorithm is its knob `algo`),
// registered under a name of its own, run by dtw's harness on 3 ranks and
// compared, inside every rank, with the single-device reference run. Exits 1
// if it does not match.
#include <dtw/dtw.h>
#include <dtw/train/strategy.h>

#include <cstdio>
#include <span>

#include "collectives.h"  // dtw::ch01

namespace {

// The strategy's one knob, read (and checked: an unknown name is refused,
// listing the valid ones) by the rank function and by the check hook alike.
dtw::ch01::AllreduceAlgo algo_of(const dtw::train::Knobs& knobs) {
  return dtw::ch01::parse_allreduce_algo(knobs.get("algo", "ring"));
}

template <class T>
void my_data_parallel(dtw::train::RankRun<T>& run) {
  const dtw::ch01::AllreduceAlgo algo = algo_of(run.knobs());
  dtw::Comm& comm = run.comm();
  const dtw::train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  // The whole model on every rank; rank r trains on its shard of the batch.
  dtw::train::Replica<T> replica(spec, run.exec(), dtw::train::ReplicaPlan::whole(spec));
  const dtw::train::Batch shard = dtw::train::make_batch(spec, 0, r, p);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    // The shard's loss and gradients, weighted by its share of the batch ...
    double loss = shard.weight * replica.forward_backward(step, r, p, static_cast<T>(shard.weight));
    // ... summed over the ranks: every rank then holds the whole batch's.
    dtw::ch01::allreduce(comm, replica.grads(), dtw::ReduceOp::kSum, algo);
    dtw::ch01::allreduce(comm, std::span<double>(&loss, 1), dtw::ReduceOp::kSum, algo);
    replica.clip(replica.local_sum_of_squares());
    replica.step(step);
    run.record_loss(step, loss);
  }
  run.report(replica);
}

// Registered at start-up, like the chapters' strategies: `find_strategy`
// (and a dtw program linking this file) knows it by name. Its knobs are
// declared (name, default, help): the harness refuses any other key before a
// rank runs, and knobs_in_force names them, defaults included.
DTW_REGISTER_STRATEGY({.name = "my-data-parallel",
                       .description = "data parallelism over chapter 01's allreduce",
                       .knobs = {{.name = "algo",
                                  .default_value = "ring",
                                  .help = "chapter 01's allreduce: naive, binomial, ring, "
                                          "rabenseifner or direct"}},
                       .min_ranks = 1,
                       .run = [](auto& run) { my_data_parallel(run); },
                       .check = [](const dtw::train::RunSpec&, int,
                                   const dtw::train::Knobs& knobs) { algo_of(knobs); }});

}  // namespace

int main() {
  dtw::train::RunSpec spec = dtw::train::standard_run("gpt-tiny");
  spec.steps = 3;
  dtw::train::HarnessOptions options;
  options.ranks = 3;
  options.knobs.set("algo", "rabenseifner");  // `dtw train --set algo=rabenseifner`
  const dtw::train::Strategy& strategy = dtw::train::find_strategy("my-data-parallel");
  const dtw::train::RunOutcome out = dtw::train::run_strategy(strategy, spec, options);
  std::printf("my-data-parallel on %d ranks, %lld steps (%s): final loss %.6f, "
              "max |param - reference| %.3g\n",
              options.ranks, static_cast<long long>(spec.steps),
              dtw::train::knobs_in_force(strategy, spec, options.ranks, options.knobs).c_str(),
              out.losses.back(), out.max_abs_param_diff);
  if (!out.checked || !out.matches) {
    std::fprintf(stderr, "custom_strategy: does not match the reference: %s\n", out.mismatch.c_str());
    return 1;
  }
  std::puts("matches the single-device reference");
  return 0;
}
