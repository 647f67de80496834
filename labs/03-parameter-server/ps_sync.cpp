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
    DTW_TODO("03.1: Serve every worker this step's parameters, add up every worker's push into the shard's gradients, and take the step.");
  }
  run.report(replica);
  return log;
}

template PsLog ps_sync<float>(train::RankRun<float>&);
template PsLog ps_sync<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
