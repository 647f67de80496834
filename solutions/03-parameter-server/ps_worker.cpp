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
  // @lab 03.5: Straggle: wait (slowdown − 1) times this step's compute time, and return how long you really waited.
  // @hint 1: A worker f times slower takes f times its compute time per step: it has already
  // @hint 1: computed once, so it waits the other f − 1 times, after computing and before
  // @hint 1: pushing. What it reports is the time it really waited, measured around the wait
  // @hint 1: itself, not the time it asked for: a wait may run over, never short.
  // @hint 2: start = now; sleep for (slowdown − 1) × compute, in the clock's own fractional
  // @hint 2: units; return now − start in seconds. Traps: slowdown × compute waits one compute
  // @hint 2: time too many; a wait rounded to whole milliseconds is no wait at all for a step
  // @hint 2: of half a millisecond; returning (slowdown − 1) × compute without waiting reports a
  // @hint 2: straggler that never straggled.
  // @hint 3: std::chrono::steady_clock::now() before and after std::this_thread::sleep_for of
  // @hint 3: (slowdown - 1) * compute; return std::chrono::duration<double>(after -
  // @hint 3: start).count().
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for((slowdown - 1) * compute);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // @end
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
    // @lab 03.1: Post the pull: from every server, a receive of its version and one of its shard of the parameters, straight into our copy.
    // @hint 1: The parameters live on the servers, a shard each, and the worker needs all of
    // @hint 1: them to compute. A pull asks every server for its version and for its shard, and
    // @hint 1: each shard lands in its own place in the worker's full copy. The receives are only
    // @hint 1: posted here: the worker waits for them at the top of its next step.
    // @hint 2: Forget the last pull's requests; then for every server s, in server order: post a
    // @hint 2: receive of one version (tag kTagVersion) into versions[s], and one of the
    // @hint 2: parameters of shard s (tag kTagParams) into the replica's parameters of that
    // @hint 2: range, both from server s's rank. Trap: receive the shard into its range of the
    // @hint 2: copy, not into the whole buffer: with two servers the second would overwrite the first.
    // @hint 3: pulls.clear(); pulls.push_back(comm.irecv(std::span<std::int64_t>(&versions[s], 1),
    // @hint 3: layout.server_rank(s), kTagVersion)); pulls.push_back(comm.irecv(
    // @hint 3: replica.params(layout.shards[s]), layout.server_rank(s), kTagParams)).
    pulls.clear();
    for (int s = 0; s < layout.servers; ++s) {
      pulls.push_back(comm.irecv(std::span<std::int64_t>(&versions[static_cast<std::size_t>(s)], 1),
                                 layout.server_rank(s), kTagVersion));
      pulls.push_back(comm.irecv(replica.params(layout.shards[static_cast<std::size_t>(s)]),
                                 layout.server_rank(s), kTagParams));
    }
    // @end
  };
  post_pull();
  for (std::int64_t step = 0;; ++step) {
    comm.wait_all(pulls);  // the parameters of the version the servers gave us
    if (async) {
      // @lab 03.2: Stop once the servers have applied W·steps pushes in all, and tell every server so.
      // @hint 1: Asynchronous training ends when the servers have applied W·steps pushes, whoever
      // @hint 1: sent them (a fast worker pushes more often than a slow one): the version a pull
      // @hint 1: brings says how many. A worker that sees the goal reached computes nothing more
      // @hint 1: and tells every server it stops, with a header that carries no gradient.
      // @hint 2: if server 0's version ≥ W × steps: for every server, send the header {0, 0, 0}
      // @hint 2: (tag kTagHeader), and leave the loop. Trap: `>` computes one push past the goal.
      // @hint 3: versions[0] >= W * spec.steps; const PushHeader done{{0, 0, 0}};
      // @hint 3: comm.send(done.values, layout.server_rank(s), kTagHeader); break.
      if (versions[0] >= W * spec.steps) {
        const PushHeader done{{0, 0, 0}};
        for (int s = 0; s < layout.servers; ++s)
          comm.send(done.values, layout.server_rank(s), kTagHeader);
        break;
      }
      // @end
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
      // @lab 03.1: Push the header and this server's shard of the gradient to every server; post the next pull before waiting for the pushes.
      // @hint 1: Every server gets the header (the loss share, the sum of squares, "a gradient
      // @hint 1: follows") and the part of the gradient that belongs to its shard, nothing more.
      // @hint 1: The pushes are posted, not waited for one by one, and the next pull is posted
      // @hint 1: before the worker waits for them (when there is a next step): a server may answer
      // @hint 1: a push with the next parameters before it has taken the whole push, and its answer
      // @hint 1: must never wait for us (the text's "The protocol"). The header's sum of squares
      // @hint 1: is that of the whole gradient: an asynchronous server clips our push by it alone,
      // @hint 1: and holds only a shard of it. Its loss is our rows' share of the batch's loss.
      // @hint 2: header = {weight × loss, Σ g² over the whole gradient, 1}. For every server s:
      // @hint 2: post a send of the header's three values (kTagHeader) and one
      // @hint 2: of the gradient of shard s (kTagGrads) to server s's rank; then, if `more`, post
      // @hint 2: the pull; then wait for all the pushes. Trap: waiting for the pushes first and
      // @hint 2: posting the pull after them deadlocks against a server that answers early.
      // @hint 3: kernels::sum_of_squares(comm.exec().place(), g.data(), g.size()) of g =
      // @hint 3: replica.grads() (on the rank's Place: the host, or its GPU); const
      // @hint 3: PushHeader header{{weight * loss, that, 1}};
      // @hint 3: pushes.push_back(comm.isend(header.values, layout.server_rank(s), kTagHeader));
      // @hint 3: pushes.push_back(comm.isend(replica.grads(layout.shards[s]),
      // @hint 3: layout.server_rank(s), kTagGrads)); post_pull() when `more`, and only then
      // @hint 3: comm.wait_all(pushes).
      const std::span<T> g = replica.grads();
      const double squares = kernels::sum_of_squares(comm.exec().place(), g.data(),
                                                     static_cast<std::int64_t>(g.size()));
      const PushHeader header{{weight * loss, squares, 1}};
      for (int s = 0; s < layout.servers; ++s) {
        pushes.push_back(comm.isend(header.values, layout.server_rank(s), kTagHeader));
        pushes.push_back(comm.isend(replica.grads(layout.shards[static_cast<std::size_t>(s)]),
                                    layout.server_rank(s), kTagGrads));
      }
      if (more) post_pull();
      comm.wait_all(pushes);
      // @end
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
