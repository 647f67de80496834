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
  DTW_TODO("03.3: Serve every worker; until every clock is stepped, add each push into its own clock's sum, step each complete clock in order, and serve the workers the bound lets go on.");
  run.report(replica);
  return log;
}

template PsLog ps_ssp<float>(train::RankRun<float>&);
template PsLog ps_ssp<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
