// The synchronous parameter server: serve, wait for everyone, sum, step.
//
// Server s holds its shard [b, e) of the model: the parameters, their
// gradients and their optimizer state (a Replica over that one range). Each
// step k it
//
//   serves   its version k and its shard to every worker (they pull),
//   waits    for every worker's push, in worker order: the header (the
//            worker's share of the loss) and the gradient shard, which
//            recv_reduce adds straight into the replica's gradients,
//   steps    clips by the global norm (its Σ g² added over the servers),
//            takes one optimizer step and records the step's loss.
//
//   worker 0 ─┐                          ┌─► worker 0
//   worker 1 ─┼─ g_w[b,e) ─► Σ_w ─► step ┼─► worker 1     θ[b,e) of version k+1
//   worker 2 ─┘   (push)                 └─► worker 2     (the next pull)
//
// Every worker pushed its rows' *share* of the batch gradient (rows/B times
// its mean), so the sum is exactly the gradient of the whole batch, the one
// the single device computes (up to the order of the additions): the server
// takes the reference's step, and this strategy matches it to 1e-9 in double.
//
// Cost per step on server s's link, with Ψ_s = e − b and b bytes per value:
//   out W·Ψ_s·b (the pulls) + W versions of 8 bytes,
//   in  W·Ψ_s·b (the pushes) + W headers of 24 bytes.
// One server (Ψ_s = Ψ) carries W·Ψ·b each way: W times a worker's link, and
// W²/(2(W−1)) times what a ring allreduce of W ranks puts on any link. The
// time of a step is the slowest worker's compute plus the server's link
// time, 2·W·Ψ_s·b·β: the workers idle while it transfers, and all of them
// wait for the slowest.
//
// Pitfalls:
// - Sum in a fixed order (worker 0, 1, …). Summing in arrival order is just as
//   correct, but not reproducible bit for bit between runs.
// - Never skip a worker that has not pushed yet: the sum would be the
//   gradient of part of the batch. If a worker dies, the run must stop with
//   an error naming it — the runtime cancels our blocked receive when any
//   rank fails, so this loop never waits forever (try `--set crash=1:3`).
//
// Check yourself: the questions at the end of the chapter text's lab section.
//
// Given below: the layout and the servers' own communicator, the shard's
// replica, the loop over steps. Yours (step 03.1): each step's serve, gather
// and optimizer step.
#include <cmath>
#include <memory>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "parameter_server.h"

namespace dtw::ch03 {

template <TrainElement T>
PsLog ps_sync(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const PsOptions options = ps_options(run.knobs());
  const PsLayout layout = ps_layout(comm.size(), model::param_layout(spec.config()).size(), options);
  // The servers' own group, for the global norm (collective: every rank splits).
  const bool server = layout.is_server(comm.rank());
  const std::unique_ptr<Comm> servers = comm.split(server ? 0 : 1, comm.rank());
  if (!server) return ps_worker(run, layout, options, WorkerMode::kSynchronous);

  const train::Range shard = layout.shards[static_cast<std::size_t>(comm.rank())];
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::range(shard.begin, shard.end));
  const train::Cost step_cost = replica.optimizer_cost();  // for the modeled fabric
  PsLog log;
  std::vector<PushHeader> headers(static_cast<std::size_t>(layout.workers));
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    // @lab 03.1: Serve every worker this step's parameters, add up every worker's push into the shard's gradients, and take the step.
    // @hint 1: Serve: every worker gets this step's version and this server's shard of the
    // @hint 1: parameters, all sent at once, and the server waits until they are delivered. Gather:
    // @hint 1: every worker's push, one worker after the other in worker order: its header (its
    // @hint 1: share of the loss) and its gradient shard, added into the shard's gradients as it
    // @hint 1: arrives, so that they end up holding the sum over all workers, the whole batch's
    // @hint 1: gradient. Log each push: taken at this step, computed on this step's parameters.
    // @hint 1: Step: a loss that is not finite stops the run; clip by the norm of the whole
    // @hint 1: gradient (every server's shard: the servers add their sums of squares, and only
    // @hint 1: when clipping is on), take one optimizer step, record the step's loss.
    // @hint 2: serve: for w in 0 … W−1: post a send of `step` (kTagVersion, one std::int64_t) and
    // @hint 2: one of the shard's parameters (kTagParams) to worker w's rank; wait for them all.
    // @hint 2: gather: for w in 0 … W−1: receive the header into headers[w] (kTagHeader); receive
    // @hint 2: the gradient (kTagGrads) *adding* it into the gradients; loss += its loss share; log
    // @hint 2: {.worker = w, .clock = step, .pulled = step, .applied = step}. Traps: a plain
    // @hint 2: receive overwrites the sum with the last worker's gradient; arrival order is just as
    // @hint 2: correct but not bit for bit the same from run to run. The phases "serve" and
    // @hint 2: "gather" ({.compute = false}) put the two halves on the timeline.
    // @hint 3: comm.isend(std::span<const std::int64_t>(&step, 1), layout.worker_rank(w),
    // @hint 3: kTagVersion); comm.isend(replica.params(), layout.worker_rank(w), kTagParams);
    // @hint 3: comm.wait_all(serves); comm.recv(h.values, layout.worker_rank(w), kTagHeader);
    // @hint 3: comm.recv_reduce(replica.grads(), layout.worker_rank(w), ReduceOp::kSum, kTagGrads);
    // @hint 3: DTW_CHECK(std::isfinite(loss), Error, "ps-sync: step <step + 1> of <steps>: the
    // @hint 3: loss is ... (not finite): diverged"); if (spec.clip_norm > 0)
    // @hint 3: replica.clip(global_sum_of_squares(*servers, replica.local_sum_of_squares()));
    // @hint 3: replica.step(step); run.record_loss(step, loss), the step in the phase "optimizer".
    {
      auto phase = run.phase("serve", {.compute = false});
      std::vector<Request> serves;
      for (int w = 0; w < layout.workers; ++w) {
        serves.push_back(comm.isend(std::span<const std::int64_t>(&step, 1), layout.worker_rank(w),
                                    kTagVersion));
        serves.push_back(comm.isend(replica.params(), layout.worker_rank(w), kTagParams));
      }
      comm.wait_all(serves);
    }
    {
      auto phase = run.phase("gather", {.compute = false});
      for (int w = 0; w < layout.workers; ++w) {
        PushHeader& h = headers[static_cast<std::size_t>(w)];
        comm.recv(h.values, layout.worker_rank(w), kTagHeader);
        comm.recv_reduce(replica.grads(), layout.worker_rank(w), ReduceOp::kSum, kTagGrads);
        loss += h.loss();
        log.updates.push_back({.worker = w, .clock = step, .pulled = step, .applied = step});
      }
    }
    DTW_CHECK(std::isfinite(loss), Error,
              "ps-sync: step " << step + 1 << " of " << spec.steps << ": the loss is " << loss << " (not finite): diverged");
    {
      auto phase = run.phase("optimizer", {.flops = step_cost.flops, .bytes = step_cost.bytes});
      // Without clipping the servers need no norm, and no exchange between them.
      if (spec.clip_norm > 0)
        replica.clip(global_sum_of_squares(*servers, replica.local_sum_of_squares()));
      replica.step(step);
    }
    run.record_loss(step, loss);
    // @end
  }
  run.report(replica);
  return log;
}

template PsLog ps_sync<float>(train::RankRun<float>&);
template PsLog ps_sync<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
