// The worker: pull, compute, push — the same loop under every server.
//
// A worker owns no part of the model. It keeps a full copy of the parameters
// only to compute with, a full gradient buffer, and no optimizer state: the
// servers step, the worker never does. Its step k:
//
//   pull   from every server s, its version and its shard's parameters
//   compute the gradient of our rows of step k's batch (make_batch shard w of W)
//   push   to every server s, a header (loss, Σ g², "a gradient follows") and
//          our gradient's shard s
//
//        server 0          server 1                worker w
//           │── v, θ[0,5) ────┼───────────────────────►│  pull
//           │                 │── v, θ[5,10) ─────────►│
//           │                 │                        │  forward + backward
//           │◄── header, g[0,5) ───────────────────────│  push
//           │                 │◄── header, g[5,10) ────│
//
// Under a synchronous or stale-synchronous server a worker pushes exactly
// spec.steps times. Under an asynchronous one it keeps going until the
// version it pulls says the servers have applied W·steps pushes in all, then
// sends a header without a gradient ("I stop"): a fast worker pushes more
// often than a slow one, which is the point of asynchrony. (Its step k reads
// row shard w of step k's batch, for k past spec.steps too: its own stream.)
//
// The next pull is posted together with this step's pushes, before waiting
// for any of them. That is not an optimisation but what keeps asynchronous
// servers from deadlocking: a server that has taken our push answers with
// parameters at once (a blocking send), and if we were still blocked pushing
// to another server that is itself blocked answering some other worker, the
// four would wait on each other in a cycle. With the receive already posted,
// a server's answer never waits for us.
//
// Bytes per step: Ψ values in (the pulls), Ψ values + S headers out. Compare a
// ring allreduce's 2Ψ(p−1)/p each way: the worker's link is not the problem;
// the server's, which carries this for all W workers, is.
//
// Stragglers (step 03.5): a worker told it is f times slower sleeps (f − 1)
// times its measured compute time after computing, so its step takes f times
// as long, as a slower GPU or a busier machine would. Under `order=scripted`
// it does not sleep: the servers already take pushes in the order the
// factors imply, in virtual time, and a sleep would only slow the test down.
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "dtw/errors.h"
#include "dtw/kernels/optim.h"
#include "parameter_server.h"

namespace dtw::ch03 {

double ps_straggle(double slowdown, std::chrono::duration<double> compute) {
  DTW_TODO("03.5: Straggle: wait (slowdown − 1) times this step's compute time, and return how long you really waited.");
}

template <TrainElement T>
PsLog ps_worker(train::RankRun<T>& run, const PsLayout& layout, const PsOptions& options,
                WorkerMode mode) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int w = layout.worker_of(comm.rank()), W = layout.workers;
  const bool async = mode == WorkerMode::kAsynchronous;
  PsLog log;
  // Parameters and gradients of the whole model; no optimizer state.
  train::ReplicaPlan plan = train::ReplicaPlan::whole(spec);
  plan.optimizer.clear();
  train::Replica<T> replica(spec, run.exec(), plan);
  replica.set_times(run.layer_times());
  // Our rows' share of each step's batch (rows/B): what a synchronous server's
  // sum needs from us. An asynchronous server applies our push alone, so it
  // gets our plain mean gradient and puts the 1/W in its learning rate.
  const double weight =
      static_cast<double>(train::shard_rows(spec, w, W).size()) / static_cast<double>(spec.batch);
  const T scale = async ? T(1) : static_cast<T>(weight);
  // The work of one forward + backward on our rows, for the modeled fabric.
  const train::Cost pass =
      replica.pass_cost(replica.network().all(), train::make_batch(spec, 0, w, W), true);

  // A pull: every server's version, then its shard of the parameters into our copy.
  std::vector<std::int64_t> versions(static_cast<std::size_t>(layout.servers));
  std::vector<Request> pulls;
  const auto post_pull = [&] {
    DTW_TODO("03.1: Post the pull: from every server, a receive of its version and one of its shard of the parameters, straight into our copy.");
  };
  post_pull();
  for (std::int64_t step = 0;; ++step) {
    comm.wait_all(pulls);  // the parameters of the version the servers gave us
    if (async) {
      DTW_TODO("03.2: Stop once the servers have applied W·steps pushes in all, and tell every server so.");
    }

    const auto start = std::chrono::steady_clock::now();
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = replica.forward_backward(step, w, W, scale);
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    log.compute_seconds += took.count();
    if (const double slowdown = options.factor(w, step); slowdown > 1) {
      // On a modeled fabric this phase is (f − 1) passes' work, so a
      // straggler takes f times as long on any device; here it sleeps,
      // except under the scripted order, which has the factors already.
      auto phase = run.phase("straggling", {.flops = (slowdown - 1) * pass.flops,
                                            .bytes = (slowdown - 1) * pass.bytes});
      if (!options.scripted) log.straggle_seconds += ps_straggle(slowdown, took);
    }
    // crash=w:k counts steps from 1, as the progress line does.
    DTW_CHECK(!(w == options.crash_worker && step + 1 == options.crash_step), Error,
              "ps: worker " << w << " (rank " << comm.rank() << ") crashed before its push of step "
                            << step + 1 << " (crash=" << w << ":" << step + 1 << ", a fault drill)");

    // Synchronous servers take exactly spec.steps pushes; an asynchronous one
    // answers every push with a pull, and we decide after it whether to go on.
    const bool more = async || step + 1 < spec.steps;
    std::vector<Request> pushes;
    {
      auto phase = run.phase("push", {.compute = false});
      DTW_TODO("03.1: Push the header and this server's shard of the gradient to every server; post the next pull before waiting for the pushes.");
    }
    replica.zero_grads();  // forward_backward adds: start the next step from zero
    if (!more) break;
  }
  return log;
}

template PsLog ps_worker<float>(train::RankRun<float>&, const PsLayout&, const PsOptions&,
                                WorkerMode);
template PsLog ps_worker<double>(train::RankRun<double>&, const PsLayout&, const PsOptions&,
                                 WorkerMode);

}  // namespace dtw::ch03
