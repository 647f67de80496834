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
  // @lab 03.2: Give the server the learning rate and warm-up of updates that each hold one worker's rows.
  // @hint 1: Each push is one worker's mean gradient on B/W rows, applied alone: at the
  // @hint 1: synchronous rate W of them per round move the parameters W times as far as one
  // @hint 1: synchronous step. So the rate comes down by W (or by the lr_scale knob when it is
  // @hint 1: given), and the warm-up lasts W times as many updates.
  // @hint 2: own's rate = spec's × (lr_scale if > 0, else 1/W); own's warm-up = spec's × W.
  // @hint 3: own.set_lr(spec.lr() * (options.lr_scale > 0 ? options.lr_scale : 1.0 / W));
  // @hint 3: own.warmup_steps = spec.warmup_steps * W.
  own.set_lr(spec.lr() * (options.lr_scale > 0 ? options.lr_scale : 1.0 / W));
  own.warmup_steps = spec.warmup_steps * W;
  // @end
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

  // @lab 03.2: Serve every worker; until all have stopped, apply each ready worker's push in turn as one optimizer step and serve that worker again.
  // @hint 1: Until a worker has its parameters it cannot compute, so every worker is served
  // @hint 1: version 0 first. Then the server serves whoever is ready, but fairly: of the workers
  // @hint 1: whose headers have come, it takes the first after the worker it served last, round
  // @hint 1: the circle, and blocks for any header only when none has come. Always taking the
  // @hint 1: lowest ready worker starves the others: their pushes grow stale while they wait. A
  // @hint 1: header without a gradient means that worker stops. Otherwise the push is applied at
  // @hint 1: once as one optimizer step, clipped by its own norm, the version goes up by one, and
  // @hint 1: that worker alone gets the newest parameters. The log records which version the push
  // @hint 1: was computed on and which it was applied to: their difference is its staleness.
  // @hint 2: serve 0 … W−1, last = W − 1; while stopped < W: pick w (under options.scripted,
  // @hint 2: while the script has workers computing, the script picks w and you wait for that
  // @hint 2: worker's header; else try w = last + 1, last + 2, … mod W and take the first whose
  // @hint 2: header has completed; none: block until any does). Copy headers[w] into h at once
  // @hint 2: (serving w posts its next receive there). No gradient: count w stopped, next. Else
  // @hint 2: receive the gradient into the shard's gradients, log {.worker = w, .clock = clock[w],
  // @hint 2: .pulled = pulled[w], .applied = version} before version moves, stop on a non-finite
  // @hint 2: loss or Σ g² with an Error 'ps-async: update <version>: worker <w> (rank <its rank>)
  // @hint 2: ...' saying it was computed on parameters '<version − pulled[w]> updates stale:
  // @hint 2: diverged', clip, step(version), advance version and clock[w], serve(w), last = w,
  // @hint 2: record_round(w, h). Traps: serve only after stepping (served before, the worker
  // @hint 2: computes on parameters one update old); never start the search at worker 0.
  // @hint 3: serve(w); script.computing(), script.next(), comm.wait(announced[w]); the sweep:
  // @hint 3: announced[v].pending() && comm.test(announced[v]); else comm.wait_any(announced);
  // @hint 3: h.has_gradient(); comm.recv(replica.grads(), layout.worker_rank(w), kTagGrads);
  // @hint 3: DTW_CHECK(std::isfinite(h.loss()) && std::isfinite(h.sum_of_squares()), Error, ...);
  // @hint 3: replica.clip(h.sum_of_squares()), replica.step(version), ++version, ++clock[w].
  for (int w = 0; w < W; ++w) serve(w);
  int last = W - 1;  // the worker served last: the next search starts after it
  int stopped = 0;   // workers that said they stop
  while (stopped < W) {
    int w = -1;  // the worker whose header this is
    if (options.scripted && script.computing()) {
      w = script.next();
      comm.wait(announced[static_cast<std::size_t>(w)]);
    } else {
      // Fair: the first ready worker after the one served last, round the
      // circle; wait_any alone returns the lowest ready index every time.
      for (int k = 1; k <= W && w < 0; ++k) {
        const int v = (last + k) % W;
        Request& next = announced[static_cast<std::size_t>(v)];
        if (next.pending() && comm.test(next)) w = v;
      }
      if (w < 0) w = static_cast<int>(comm.wait_any(announced));
    }
    const auto i = static_cast<std::size_t>(w);
    const PushHeader h = headers[i];  // a copy: serving w posts its next receive into headers[w]
    if (!h.has_gradient()) {
      ++stopped;
      continue;
    }
    comm.recv(replica.grads(), layout.worker_rank(w), kTagGrads);
    log.updates.push_back({.worker = w, .clock = clock[i], .pulled = pulled[i], .applied = version});
    DTW_CHECK(std::isfinite(h.loss()) && std::isfinite(h.sum_of_squares()), Error,
              "ps-async: update " << version << ": worker " << w << " (rank "
                                  << layout.worker_rank(w) << ") pushed a non-finite loss or "
                                  << "gradient (loss share " << h.loss() << ", Σ g² "
                                  << h.sum_of_squares() << ") at its step " << clock[i]
                                  << ", computed on parameters " << version - pulled[i]
                                  << " updates stale: diverged (asynchronous SGD takes W steps per "
                                     "round: divide the learning rate by W, lr_scale)");
    {
      auto phase = run.phase("optimizer", {.flops = step_cost.flops, .bytes = step_cost.bytes});
      replica.clip(h.sum_of_squares());
      replica.step(version);
    }
    ++version;
    ++clock[i];
    serve(w);
    last = w;
    record_round(w, h);
  }
  // @end
  run.report(replica);
  return log;
}

template PsLog ps_async<float>(train::RankRun<float>&);
template PsLog ps_async<double>(train::RankRun<double>&);

}  // namespace dtw::ch03
