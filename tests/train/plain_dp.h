#pragma once
// Plain data parallelism on the backend's reference allreduce: a test of the
// training layer, not a chapter's strategy. Every rank holds the whole model,
// computes the gradient of its shard of the batch weighted by the shard's
// share of the batch (so uneven shards average correctly), sums the
// gradients, clips and steps like the reference.
#include <cstdint>

#include "dtw/reference.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"

namespace dtw::train::testing {

/// One gradient element to corrupt (after clipping, before the step) on one
/// rank: the planted error the comparison must name.
struct Plant {
  int rank = -1;          ///< −1: none
  std::int64_t step = 0;  ///< data step
  std::int64_t index = 0;  ///< flat index of the element
  /// What the rank reports at the end: everything (1), nothing (0), or the
  /// first half of the model (0.5): the harness must see through the last two.
  double reported = 1;
  /// The loss the rank records at `step` is multiplied by this (the
  /// parameters stay right: a divergence of the loss alone).
  double loss_factor = 1;
  /// Whether to corrupt the gradient element (false: only the loss, if any).
  bool gradient = true;
};

template <class T>
void plain_dp(RankRun<T>& run, const Plant& plant = {}) {
  Comm& comm = run.comm();
  const RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  Replica<T> replica(spec, run.exec(), ReplicaPlan::whole(spec));
  const Batch shard = make_batch(spec, 0, r, p);
  const double weight = shard.weight;  // rows_r / batch
  const Cost pass = replica.pass_cost(replica.network().all(), shard, true);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = weight * replica.forward_backward(step, r, p, static_cast<T>(weight));
    }
    {
      auto phase = run.phase("allreduce", {.compute = false});
      reference::allreduce(comm, replica.grads(), ReduceOp::kSum);
      reference::allreduce(comm, std::span<double>(&loss, 1), ReduceOp::kSum);
    }
    replica.clip(replica.local_sum_of_squares());  // every rank holds the whole sum
    if (r == plant.rank && step == plant.step && plant.gradient) {
      const std::span<T> g = replica.grads(plant.index, plant.index + 1);
      g[0] = g[0] * T(1.5) + T(1e-3);
    }
    replica.step(step);
    run.record_loss(step, r == plant.rank && step == plant.step ? loss * plant.loss_factor : loss);
  }
  if (plant.reported == 1) {
    run.report(replica);
  } else if (plant.reported > 0) {
    const auto half = static_cast<std::int64_t>(plant.reported * replica.model_size());
    const std::span<T> held = replica.params(0, half);
    run.report_params(std::span<const T>(held.data(), held.size()), 0);
  }
}

}  // namespace dtw::train::testing
