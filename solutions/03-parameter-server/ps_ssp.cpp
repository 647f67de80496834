// Stale-synchronous parallel (SSP): synchronous steps, but a bounded head start.
//
// Ho et al. (NIPS 2013) put a dial between the two servers before: every
// worker counts its pushes (its *clock*), and a worker may run at most s
// clocks ahead of the slowest. The server here keeps the synchronous step —
// one optimizer step per clock, on the sum of the W pushes of that clock —
// but stops making the fast workers wait for it: a worker that pushed clock c
// is served the newest parameters at once, as long as the server has already
// stepped clock c − s; only then is its pull held back.
//
//   s = 1, W = 2, worker 1 three times slower:
//     server version:  0     1           2           3
//     worker 0: c0 ─► c1 ─► (held: c2 needs version ≥ 1) ─► c2 ─► ...
//     worker 1: c0 ───────────────► c1 ──────────────► c2
//
// So the oldest unfinished clock is `version`, and pushes can arrive for
// clocks version … version + s: each clock's gradient sum is kept in its own
// buffer until the clock is complete (made when its first push arrives,
// freed when it is stepped: at most s + 1 of them, Ψ_s values each, counted
// as communication buffers). A push of clock c computed on version v is
// applied at the step that turns version c into c + 1, so its staleness is
// c − v ≤ s by construction: the server only ever served that worker when
// v ≥ c − s.
//
// The dial:
// - s = 0: nobody starts clock c before clock c − 1 is stepped: this is
//   ps_sync, step for step (and the reference: the tests check it).
// - s = 1, 2, 3: a straggler no longer stops the others at every step; they
//   run ahead on parameters at most s steps old, and wait only when the gap
//   would exceed s. Most of asynchronous training's speed, with a bound on
//   how stale any gradient is — the bound that SSP's convergence proof needs.
// - s = ∞ (`staleness=inf`): nobody ever waits for the parameters, though a
//   clock's step still waits for its last push (ps_async does not).
//
// Cost: the same bytes as ps_sync per clock; memory: up to (s + 1)·Ψ_s more
// on each server. Time per clock with a straggler of factor f among fast
// workers: about f compute times for the straggler's clock, but the fast
// workers fill the wait with up to s clocks of their own.
//
// Check yourself: the questions at the end of the chapter text's lab section.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "dtw/array.h"
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "parameter_server.h"

namespace dtw::ch03 {
namespace {

// One clock in flight on a server: the sum of its pushes so far.
template <class T>
struct Clock {
  Array<T> sum;      // Σ of the gradient shards pushed for this clock
  int pushes = 0;    // how many of the W have arrived
  double loss = 0;   // Σ of their loss shares
};

}  // namespace

template <TrainElement T>
PsLog ps_ssp(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const PsOptions options = ps_options(run.knobs());
  const PsLayout layout = ps_layout(comm.size(), model::param_layout(spec.config()).size(), options);
  const bool server = layout.is_server(comm.rank());
  const std::unique_ptr<Comm> servers = comm.split(server ? 0 : 1, comm.rank());
  if (!server) return ps_worker(run, layout, options, WorkerMode::kSynchronous);

  const int W = layout.workers;
  const std::int64_t s = options.staleness;
  const train::Range shard = layout.shards[static_cast<std::size_t>(comm.rank())];
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::range(shard.begin, shard.end));
  const train::Cost step_cost = replica.optimizer_cost();  // for the modeled fabric

  PsLog log;
  std::vector<PushHeader> headers(static_cast<std::size_t>(W));
  std::vector<Request> announced(static_cast<std::size_t>(W));
  std::vector<std::int64_t> clock(static_cast<std::size_t>(W), 0), pulled(clock);
  std::vector<char> held(static_cast<std::size_t>(W), 0);  // pushed, not yet served again
  std::map<std::int64_t, Clock<T>> open;                    // clocks with pushes, not stepped
  ArrivalScript script(W, options);
  std::int64_t version = 0;  // clocks stepped so far
  const auto serve = [&](int w) {
    const auto i = static_cast<std::size_t>(w);
    announced[i] = comm.irecv(headers[i].values, layout.worker_rank(w), kTagHeader);
    comm.send(std::span<const std::int64_t>(&version, 1), layout.worker_rank(w), kTagVersion);
    comm.send(replica.params(), layout.worker_rank(w), kTagParams);
    pulled[i] = version;
    held[i] = 0;
    script.released(w);
  };
  // @lab 03.3: Serve every worker; until every clock is stepped, add each push into its own clock's sum, step each complete clock in order, and serve the workers the bound lets go on.
  // @hint 1: The server still takes one optimizer step per clock, on the sum of that clock's W
  // @hint 1: pushes, but a worker that pushed does not wait for its clock to be stepped: it is
  // @hint 1: served the newest parameters at once, unless it would then be more than s clocks
  // @hint 1: ahead of the server's version; such a worker is held until the version catches up.
  // @hint 1: Pushes of several clocks are in flight at once, so each clock keeps its own sum until
  // @hint 1: all W pushes of it have come; then, oldest first, it is stepped and dropped. A worker
  // @hint 1: that has pushed its last clock is not served again.
  // @hint 2: serve 0 … W−1. While version < steps: w = the next push (the script under
  // @hint 2: options.scripted, else the first to arrive); c = clock[w]; the sum of clock c (made
  // @hint 2: by its first push) += w's gradient; its loss += the header's; count the push; log
  // @hint 2: {.worker = w, .clock = c, .pulled = pulled[w], .applied = c}; clock[w] += 1; w is held
  // @hint 2: if it has clocks left. While clock `version` has all W pushes: copy its sum into the
  // @hint 2: gradients, clip by the servers' global norm, step(version), record its loss, drop
  // @hint 2: it, version += 1. Then serve every held worker v with clock[v] − s ≤ version: its next
  // @hint 2: clock is then at most s ahead, so every staleness is ≤ s and s = 0 is synchronous.
  // @hint 2: Traps: `<` instead of `≤` never reaches the bound (s = 0 deadlocks); one running sum
  // @hint 2: applies a fast worker's next clock a step early.
  // @hint 3: serve(w); script.next(), comm.wait(announced[w]) or comm.wait_any(announced);
  // @hint 3: open.find(c), open.emplace(c, Clock<T>{Array<T>(run.exec(), shard.size(),
  // @hint 3: MemoryCategory::kCommBuffers)}), sum.fill(T(0)); comm.recv_reduce(sum.span(),
  // @hint 3: layout.worker_rank(w), ReduceOp::kSum, kTagGrads); headers[w].loss(). Stepping:
  // @hint 3: comm.copy_local(replica.grads(), k.sum.span()), replica.clip(global_sum_of_squares(
  // @hint 3: *servers, replica.local_sum_of_squares())), replica.step(version),
  // @hint 3: run.record_loss(version, k.loss), open.erase(it); DTW_CHECK(std::isfinite(k.loss),
  // @hint 3: Error, "ps-ssp: step <version + 1> of <steps>: the loss is ... (not finite):
  // @hint 3: diverged") before it; the phase "optimizer" around it.
  for (int w = 0; w < W; ++w) serve(w);
  while (version < spec.steps) {
    int w = 0;
    if (options.scripted) {
      w = script.next();
      comm.wait(announced[static_cast<std::size_t>(w)]);
    } else {
      w = static_cast<int>(comm.wait_any(announced));
    }
    const auto i = static_cast<std::size_t>(w);
    const std::int64_t c = clock[i];
    auto it = open.find(c);
    if (it == open.end()) {  // the clock's first push: a zeroed sum, a counted buffer
      it = open.emplace(c, Clock<T>{Array<T>(run.exec(), shard.size(), MemoryCategory::kCommBuffers)})
               .first;
      it->second.sum.fill(T(0));
    }
    comm.recv_reduce(it->second.sum.span(), layout.worker_rank(w), ReduceOp::kSum, kTagGrads);
    it->second.loss += headers[i].loss();
    ++it->second.pushes;
    log.updates.push_back({.worker = w, .clock = c, .pulled = pulled[i], .applied = c});
    held[i] = ++clock[i] < spec.steps;

    // Step every complete clock, oldest first.
    for (auto done = open.find(version); done != open.end() && done->second.pushes == W;
         done = open.find(version)) {
      Clock<T>& k = done->second;
      DTW_CHECK(std::isfinite(k.loss), Error,
                "ps-ssp: step " << version + 1 << " of " << spec.steps
                                 << ": the loss is " << k.loss << " (not finite): diverged");
      auto phase = run.phase("optimizer", {.flops = step_cost.flops, .bytes = step_cost.bytes});
      comm.copy_local(replica.grads(), k.sum.span());
      replica.clip(global_sum_of_squares(*servers, replica.local_sum_of_squares()));
      replica.step(version);
      run.record_loss(version, k.loss);
      open.erase(done);
      ++version;
    }
    // Serve every worker the bound now lets go on.
    for (int v = 0; v < W; ++v)
      if (held[static_cast<std::size_t>(v)] && clock[static_cast<std::size_t>(v)] - s <= version)
        serve(v);
  }
  // @end
  run.report(replica);
  return log;
}

template PsLog ps_ssp<float>(train::RankRun<float>&);
template PsLog ps_ssp<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
