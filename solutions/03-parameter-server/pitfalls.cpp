// Broken on purpose: bugs from the field, each one of this chapter's
// strategies with one thing done wrong, and what catches it. `dtw run pitfall
// NAME` runs them; tests/03-parameter-server/pitfalls_test.cpp checks that
// the workbench stops each one with a message naming what went wrong.
//
// - async_at_sync_lr: ps_async at the learning rate that suits ps_sync. W
//   pushes computed on (nearly) the same parameters are applied one after
//   the other, each a full step: W times the step of the synchronous server
//   per round, plus staleness. ElasticDL #89 measured it on MNIST (2, 4 and 8
//   workers stuck at 10% accuracy without dividing the rate by W);
//   tensorflow #14494 saw 30 asynchronous workers go to NaN at the rate one
//   machine trained with (0.01), and train at 0.0001. Caught by ps_async's
//   check at the first non-finite loss or gradient, which names the update,
//   the worker, its step and how stale its parameters were.
// - dying_worker: ps_sync whose worker 1 fails before its push of step 3.
//   TensorFlow's SyncReplicasOptimizer "hangs" in exactly one expected case,
//   a worker that took its token and died with no backup (tensorflow #5022,
//   whose answer is: add a timeout). Here the runtime cancels every rank's
//   pending call when one rank fails, so the server's receive ends with an
//   error naming the rank that failed, on every rank, at once.
#include "parameter_server.h"

namespace dtw::ch03::pitfalls {

template <TrainElement T>
PsLog async_at_sync_lr(train::RankRun<T>& run) {
  // The one thing wrong: no 1/W on the rate (lr_scale = 1).
  train::Knobs knobs = run.knobs();
  knobs.set("lr_scale", "1");
  train::RankRun<T> wrong(run.comm(), run.spec(), knobs);
  return ps_async(wrong);
}

template <TrainElement T>
PsLog dying_worker(train::RankRun<T>& run) {
  // Worker 1 fails before its push of step 3 (a fault drill: crash=1:3).
  train::Knobs knobs = run.knobs();
  knobs.set("crash", "1:3");
  train::RankRun<T> wrong(run.comm(), run.spec(), knobs);
  return ps_sync(wrong);
}

template PsLog async_at_sync_lr<float>(train::RankRun<float>&);
template PsLog async_at_sync_lr<double>(train::RankRun<double>&);
template PsLog dying_worker<float>(train::RankRun<float>&);
template PsLog dying_worker<double>(train::RankRun<double>&);

}  // namespace dtw::ch03::pitfalls
