#pragma once
/// @file
/// Chapter 03 — parameter servers: the strategies the learner writes.
///
/// A parameter-server run splits the world into S **servers** (ranks 0 … S−1)
/// and W **workers** (ranks S … S+W−1). Server s holds one contiguous shard of
/// the flat parameter buffer with its gradients and optimizer state; a worker
/// holds a full copy of the parameters (to compute with) and no optimizer
/// state. Every step a worker *pulls* the parameters shard by shard from the
/// servers, computes the gradient of its share of the batch, and *pushes* it
/// back shard by shard; the servers apply what they receive:
///
/// - `ps_sync`: every server waits for all W pushes, sums them, steps once,
///   and serves the next pull. It reproduces the single-device reference.
/// - `ps_async`: a server applies each push the moment it arrives
///   (Comm::wait_any), as its own optimizer step, and serves that worker the
///   newest parameters; nobody waits for anybody.
/// - `ps_ssp`: stale-synchronous parallel: a server steps once per *clock*
///   (all W pushes of one step), but a worker may run up to `staleness`
///   clocks ahead of the slowest before its pull is held back. Staleness 0 is
///   `ps_sync`.
///
/// Everything is configured by knobs (`dtw train --set key=value`), parsed by
/// ps_options():
///
/// | knob | meaning | default |
/// |------|---------|---------|
/// | `servers=S` | server ranks | 1 |
/// | `workers=W` | worker ranks; must equal world − S | world − S |
/// | `ranges=b-e,…` | explicit server shards, S of them, covering [0, Ψ) | even split |
/// | `staleness=s` | ps-ssp's bound (`inf`: unbounded) | 2 |
/// | `straggler=w:f,…` | worker w takes f× its compute time, every step (sleeps (f−1)×); 1 ≤ f ≤ 100, each worker once | none |
/// | `jitter=f:p` | every worker takes f× (1 ≤ f ≤ 100) on a share p of its steps (a hash of worker and step) | none |
/// | `order=arrival\|scripted` | servers take pushes as they come, or in the order the straggler factors imply | arrival |
/// | `lr_scale=x` | ps-async's learning-rate factor | 1/W |
/// | `crash=w:k` | worker w fails before its push of step k, 1 ≤ k ≤ steps, counted from 1 as the progress line counts (fault drill) | none |
///
/// Bad input (S or W below 1, S + W ≠ world, a negative staleness, shards that
/// leave parameters unowned or overlap, a straggler named twice or slower than
/// 100×, a crash step the run never reaches, a malformed knob) raises
/// dtw::InvalidArgument naming the values, on every rank, before any message.

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/comm.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"

namespace dtw::ch03 {

/// Message tags of the protocol (user tags; collectives run apart).
inline constexpr int kTagVersion = 1;  ///< server → worker: its version (one int64), before…
inline constexpr int kTagParams = 2;   ///< server → worker: …its shard of the parameters
inline constexpr int kTagHeader = 3;   ///< worker → server: a PushHeader
inline constexpr int kTagGrads = 4;    ///< worker → server: a shard of gradients

/// The strategies' knobs, parsed (see the file comment).
struct PsOptions {
  int servers = 1;                  ///< S
  int workers = 0;                  ///< W; 0: world − S
  std::vector<train::Range> ranges;  ///< explicit shards (empty: even split)
  std::int64_t staleness = 2;       ///< ps-ssp's bound s; kUnbounded: none
  std::vector<double> slowdown;     ///< per worker: its compute-time factor (≥ 1)
  double jitter_factor = 1;         ///< jitter=f:p: the factor of a slow step
  double jitter_odds = 0;           ///< jitter=f:p: the share of slow steps
  bool scripted = false;            ///< order=scripted
  double lr_scale = 0;              ///< ps-async's factor; 0: 1/W
  int crash_worker = -1;            ///< crash=w:k (−1: none)
  std::int64_t crash_step = -1;     ///< crash=w:k, counted from 1 (−1: none)

  /// The largest straggler or jitter factor: a worker 100× slower already
  /// shows every effect; 10⁶× only makes a tiny run take minutes.
  static constexpr double kMaxSlowdown = 100;
  /// `staleness=inf`.
  static constexpr std::int64_t kUnbounded = std::int64_t{1} << 40;
  /// Worker w's compute-time factor (1 when not a straggler).
  double slowdown_of(int w) const;
  /// Worker w's factor at its step `step`: its straggler factor, or the
  /// jitter factor when (w, step) hashes below the jitter's odds, whichever
  /// is larger. A pure function, so every rank and every run agree.
  double factor(int w, std::int64_t step) const;
};

/// Parses the knobs; InvalidArgument naming the knob and its value for
/// malformed ones, a negative staleness, a factor below 1.
PsOptions ps_options(const train::Knobs& knobs);

/// The knobs `strategy` ("ps-sync", "ps-async" or "ps-ssp") declares
/// (train::Strategy::knobs): the table above, `staleness` for ps-ssp only and
/// `lr_scale` for ps-async only. Their values are checked by ps_options.
std::vector<train::Knob> ps_knobs(std::string_view strategy);

/// Who is who, and which shard each server holds.
struct PsLayout {
  int servers = 1;                   ///< S: ranks 0 … S−1
  int workers = 1;                   ///< W: ranks S … S+W−1
  std::vector<train::Range> shards;  ///< shards[s]: server s's range of the flat buffer

  /// True for a server rank.
  bool is_server(int rank) const { return rank < servers; }
  /// The world rank of server s.
  int server_rank(int s) const { return s; }
  /// The world rank of worker w.
  int worker_rank(int w) const { return servers + w; }
  /// The worker index of a worker rank.
  int worker_of(int rank) const { return rank - servers; }
};

/// The layout of a world of `world` ranks training a model of `model_size`
/// parameters: S and W from `options` (InvalidArgument when S < 1, W < 1,
/// S + W ≠ world, or a straggler or crash names a worker w ≥ W), shards from `options.ranges` (validated: S sorted,
/// disjoint ranges covering [0, model_size) exactly; a gap is named by its
/// range) or, by default, [0, Ψ) split into S contiguous, nearly equal
/// ranges (the first Ψ mod S one element longer). Step 03.4.
PsLayout ps_layout(int world, std::int64_t model_size, const PsOptions& options);

/// What a worker sends before each gradient push: small, so a server can wait
/// on every worker's next header at once (wait_any) and then receive the
/// gradient from the one that came. On the wire it is three doubles.
struct PushHeader {
  std::array<double, 3> values{};  ///< {loss(), sum_of_squares(), 1 if a gradient follows}
  /// This worker's share of the batch's mean loss (rows/B × the mean over its rows).
  double loss() const { return values[0]; }
  /// Σ g² of the whole gradient it pushes (a server that clips this push alone needs it).
  double sum_of_squares() const { return values[1]; }
  /// False for an asynchronous worker's last header: it stops, no gradient follows.
  bool has_gradient() const { return values[2] != 0; }
};

/// One push, as a server took it.
struct PsUpdate {
  int worker = 0;            ///< worker index, 0 … W−1
  std::int64_t clock = 0;    ///< the worker's step: its clock-th push (0-based)
  std::int64_t pulled = 0;   ///< the server version the worker computed on
  std::int64_t applied = 0;  ///< the version it was applied to; staleness = applied − pulled
  /// Field by field.
  bool operator==(const PsUpdate&) const = default;
};

/// What one rank saw: a server its updates in the order it took them, a
/// worker how long it computed and how long it straggled.
struct PsLog {
  std::vector<PsUpdate> updates;  ///< servers: every push, in the order taken
  double compute_seconds = 0;     ///< workers: forward + backward, summed over steps
  double straggle_seconds = 0;    ///< workers: time slept as a straggler
};

/// The order in which pushes reach a server when worker w takes exactly
/// factor(w, k) units of virtual time for its step k (`order=scripted`): the
/// push due first comes first, ties to the lower worker. Reproducible on
/// every run, so tests can predict which version each push was computed on.
class ArrivalScript {
 public:
  /// Workers 0 … W−1, none computing until released.
  ArrivalScript(int workers, const PsOptions& options);
  /// The worker whose push is due next among those computing; it stops computing.
  int next();
  /// True while some worker is computing (released and not yet taken by next()).
  bool computing() const;
  /// Worker w received parameters now: its next push is due now + its next step's factor.
  void released(int w);
  /// The virtual time of the last push taken.
  double now() const { return now_; }

 private:
  PsOptions options_;
  std::vector<double> due_;         // < 0: not computing
  std::vector<std::int64_t> step_;  // the step each worker is given next
  double now_ = 0;
};

/// Σ g² over every server's shard: the servers' `local` sums added over the
/// server communicator with chapter 01's allreduce (one server: `local`).
/// Step 03.4.
double global_sum_of_squares(Comm& servers, double local);

/// The straggler's injected delay (step 03.5). A worker `slowdown` times
/// slower has just spent `compute` on this step's forward and backward; it
/// now waits the other (slowdown − 1) × compute, so that the step takes
/// slowdown × compute, as on a slower device. Returns the seconds it really
/// waited, measured around the wait (a sleep may overshoot, never undershoot).
/// slowdown ≥ 1; at 1 it returns at once. ps_worker calls it after computing
/// a step whose factor is above 1, except under `order=scripted`, and adds
/// what it returns to PsLog::straggle_seconds.
double ps_straggle(double slowdown, std::chrono::duration<double> compute);

/// Which kind of server a worker works for.
enum class WorkerMode {
  /// ps_sync, ps_ssp: exactly spec.steps pushes, each its rows' *share* of the
  /// batch gradient (rows/B × its mean), which the servers add up.
  kSynchronous,
  /// ps_async: the *mean* gradient of its rows (the server applies each push
  /// alone), pushed until a pull's version (server 0's) reaches W·steps; then
  /// a header without a gradient tells every server it stops.
  kAsynchronous,
};

/// The worker's side, the same for every strategy: pull every shard (each
/// server's version, then its parameters), compute the gradient of its rows
/// of the step's batch, straggle if told to, push a header and every shard's
/// gradient. Steps 03.1 (pull and push) and 03.5 (straggling).
template <TrainElement T>
PsLog ps_worker(train::RankRun<T>& run, const PsLayout& layout, const PsOptions& options,
                WorkerMode mode);

/// Synchronous parameter server (step 03.1). Records the global mean loss of
/// every step on every server and reports each server's shard: matches the
/// reference. Bytes on server s's link per step: W·|shard s| values each way
/// (params out, gradients in), W versions out and W headers in.
template <TrainElement T>
PsLog ps_sync(train::RankRun<T>& run);

/// Asynchronous parameter server (step 03.2). Each push is one update: one
/// worker's mean gradient, clipped alone and stepped at the learning rate ×
/// lr_scale (default 1/W; warm-up stretched to W× as many updates). Workers
/// stop once they pull version W·steps; pushes already in flight then are
/// applied too (at most W − 1 more). Records a loss for each of the first
/// spec.steps rounds of W updates (B rows' worth of pushes, whoever sent
/// them): their mean, weighed by rows. Matches the reference when W = 1. A non-finite loss stops the run with an Error
/// naming the update, the worker, its step and its staleness.
template <TrainElement T>
PsLog ps_async(train::RankRun<T>& run);

/// Stale-synchronous parameter server (step 03.3): one optimizer step per
/// clock, a worker's pull for clock c held back until the servers' version
/// is at least c − staleness, so every recorded staleness is ≤ the bound.
/// Staleness 0 matches ps_sync and the reference.
template <TrainElement T>
PsLog ps_ssp(train::RankRun<T>& run);

// ---- pitfalls: broken on purpose (dtw run pitfall NAME) -------------------------

/// Bugs from the field, each a strategy above with one thing done wrong, for
/// `dtw run pitfall` and the tests that the workbench catches them.
namespace pitfalls {
/// ps_async at the synchronous learning rate (lr_scale = 1): W steps per
/// round (ElasticDL #89, tensorflow #14494). With a rate the synchronous
/// server trains at, it diverges, and ps_async stops at the first non-finite
/// loss, naming the update, the worker and the staleness.
template <TrainElement T>
PsLog async_at_sync_lr(train::RankRun<T>& run);
/// ps_sync whose worker 1 fails before its push of step 3 (tensorflow #5022:
/// a synchronous server waiting for a worker that died): the run ends with
/// an error naming that worker on every rank, not a hang.
template <TrainElement T>
PsLog dying_worker(train::RankRun<T>& run);
}  // namespace pitfalls

}  // namespace dtw::ch03
