// The asynchronous parameter server: apply each push the moment it arrives.
//
// The synchronous server makes every worker wait for the slowest. This one
// waits for *any* worker: it keeps a receive posted for every worker's next
// header, takes one that has come, and blocks in Comm::wait_any on all of
// them only when none has. Among the workers that are ready it takes turns:
// the first ready one after the worker it served last, round the circle.
// wait_any alone returns the lowest ready index, and a server busy enough
// that several headers wait for it would then serve workers 0 and 1 over and
// over while the others' pushes grow stale (four equal workers of gpt-tiny,
// 60 steps: 119, 106, 17 and 1 pushes). The chosen worker's gradient shard
// is received, clipped by that push's own norm, and applied as one
// optimizer step; the server's version (the number of updates applied) goes
// up by one and that worker alone is sent the newest parameters. Nobody
// waits for anybody — Downpour SGD (Dean et al.,
// 2012) and the "asynchronous" mode of TensorFlow's and ElasticDL's servers.
//
//   version:      0        1        2        3        4
//   worker 0:  pull(0) ─push─► apply   pull(1) ─push─► apply ...
//   worker 1:  pull(0) ───────────push──────► apply (computed on 0, applied
//                                              to 2: staleness 2)
//
// There is no step count per worker either: a worker keeps pushing until a
// pull's version reaches W·steps, so a fast worker pushes more often than a
// slow one (its rows are its own stream: shard w of step k for every k it
// reaches), and then says it stops with a header that carries no gradient.
// Pushes still in flight at that point are applied too (at most W − 1).
//
// The price is **staleness**: a push was computed on the version the worker
// pulled, but lands on a newer one. Its staleness is (server version when
// applied) − (version pulled); with W equally fast workers it hovers around
// W − 1, and a straggler's pushes are much staler. A stale gradient is the
// gradient at old parameters: a step in a direction that was right a few
// updates ago. Small staleness costs little; large staleness makes SGD
// oscillate or diverge, which is why the learning rate matters so much here.
//
// The learning rate. Each push is the mean gradient of one worker's B/W rows,
// and W of them are applied where the synchronous server applies one average:
// at the synchronous rate η that is a step W times as long per round of
// pushes (ElasticDL #89: "equivalent to n·lr"; tensorflow #14494: 30 async
// workers at the single-machine rate went to NaN). So this server steps at
// η·lr_scale, 1/W by default, and stretches the warm-up over W× as many
// updates. `--set lr_scale=1` is the pitfall; `dtw run pitfall
// ps-async-at-sync-lr` shows it diverge and this loop stop it at the first
// non-finite loss, naming the update, the worker and the staleness.
//
// Loss curve: every W updates (a *round*: B rows' worth of pushes, whoever
// sent them) the server records their mean loss, so the curve has spec.steps
// points like every other strategy's and its x axis is rows processed. With a
// straggler a round holds more pushes of the fast workers than of the slow
// one: the rounds go by at the rate the whole cluster works, not at the
// straggler's (what the benchmark's tokens/s shows). Only the first
// spec.steps rounds are recorded; the pushes in flight at the end are extra.
//
// Check yourself: the questions at the end of the chapter text's lab section.
#include <cmath>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "parameter_server.h"

namespace dtw::ch03 {

template <TrainElement T>
PsLog ps_async(train::RankRun<T>& run) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const PsOptions options = ps_options(run.knobs());
  const PsLayout layout = ps_layout(comm.size(), model::param_layout(spec.config()).size(), options);
  if (!layout.is_server(comm.rank())) return ps_worker(run, layout, options, WorkerMode::kAsynchronous);

  const int W = layout.workers;
  // Each update is one worker's B/W rows: the rate and the warm-up follow.
  train::RunSpec own = spec;
  DTW_TODO("03.2: Give the server the learning rate and warm-up of updates that each hold one worker's rows.");
  const train::Range shard = layout.shards[static_cast<std::size_t>(comm.rank())];
  train::Replica<T> replica(own, run.exec(), train::ReplicaPlan::range(shard.begin, shard.end));
  const train::Cost step_cost = replica.optimizer_cost();  // for the modeled fabric

  PsLog log;
  std::vector<PushHeader> headers(static_cast<std::size_t>(W));
  std::vector<Request> announced(static_cast<std::size_t>(W));  // each worker's next header
  std::vector<std::int64_t> clock(static_cast<std::size_t>(W), 0), pulled(clock);
  ArrivalScript script(W, options);
  const std::int64_t goal = W * spec.steps;  // a worker that pulls this version stops
  std::int64_t version = 0;                  // updates applied so far
  // Sends worker w the newest version and parameters, and waits for its next header.
  const auto serve = [&](int w) {
    const auto i = static_cast<std::size_t>(w);
    announced[i] = comm.irecv(headers[i].values, layout.worker_rank(w), kTagHeader);
    comm.send(std::span<const std::int64_t>(&version, 1), layout.worker_rank(w), kTagVersion);
    comm.send(replica.params(), layout.worker_rank(w), kTagParams);
    pulled[i] = version;
    if (version < goal) script.released(w);  // else it stops: no push to expect
  };
  // Each worker's share of a batch (rows/B): a round's mean loss weighs its pushes by it.
  std::vector<double> weight(static_cast<std::size_t>(W));
  for (int w = 0; w < W; ++w)
    weight[static_cast<std::size_t>(w)] =
        static_cast<double>(train::shard_rows(spec, w, W).size()) / static_cast<double>(spec.batch);
  double round_loss = 0, round_weight = 0;  // Σ loss shares and Σ weights of this round's pushes
  // Call after applying worker w's push h (version already counts it): every W
  // updates, the round's mean loss (pushes weighed by their rows), for the
  // first spec.steps rounds (pushes in flight at the end are extra).
  const auto record_round = [&](int w, const PushHeader& h) {
    if (version > goal) return;
    round_loss += h.loss();
    round_weight += weight[static_cast<std::size_t>(w)];
    if (version % W == 0) {
      run.record_loss(version / W - 1, round_loss / round_weight);
      round_loss = round_weight = 0;
    }
  };

  DTW_TODO("03.2: Serve every worker; until all have stopped, apply each ready worker's push in turn as one optimizer step and serve that worker again.");
  run.report(replica);
  return log;
}

template PsLog ps_async<float>(train::RankRun<float>&);
template PsLog ps_async<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
