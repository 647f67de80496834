#pragma once
// Helpers of chapter 03's tests: a small run, a harness with a time limit, and
// a run of one strategy that hands every rank's PsLog and reported parameters
// to the test on every process (threads or the MPI twin).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dtw/config.h"
#include "dtw/process_comm.h"
#include "dtw/results.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_train_test.h"
#include "parameter_server.h"

namespace dtw::ch03::testing {

/// A few steps of `model` in double: what the comparisons with the reference run on.
inline train::RunSpec tiny(const std::string& model, std::int64_t steps = 3,
                           std::int64_t batch = 12) {
  train::RunSpec spec = train::standard_run(model);
  spec.steps = steps;
  spec.batch = batch;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

/// Knobs from "k=v" strings.
inline train::Knobs knobs(std::initializer_list<std::string> kv) {
  return train::Knobs::parse(std::vector<std::string>(kv));
}

/// A strategy of this chapter, as a function of the rank's run.
template <class T>
using PsFn = std::function<PsLog(train::RankRun<T>&)>;

/// What a run left, the same on every process.
template <class T>
struct PsRun {
  train::RunOutcome out;
  std::vector<std::vector<PsUpdate>> updates;  ///< by rank: the servers' logs
  std::vector<double> compute, straggle;       ///< by rank: the workers' seconds
  std::vector<T> params;                       ///< the servers' shards put together
};

/// Under the MPI twin a process beyond a launch's world ran no rank, so the
/// results its rank threads would have left (`value`, `filled` where they
/// did) are missing: it takes them from the first process that has them, as
/// the harness does for its outcome. Elsewhere, nothing.
template <class V>
void share_with_idle_processes(const Report& report, bool filled, V& value) {
  const std::unique_ptr<Comm> job = process_comm(report.backend);
  if (!job) return;
  const auto who = allgather_results(*job, static_cast<int>(filled));
  const auto values = allgather_results(*job, value);
  for (std::size_t p = 0; p < who.size(); ++p) {
    if (who[p] == 0) continue;
    if (!filled) value = values[p];
    return;
  }
}

/// Runs `fn` on `ranks` ranks with `k`; `compare`: with the reference.
template <class T>
PsRun<T> run_ps(const PsFn<T>& fn, const train::RunSpec& spec, int ranks, const train::Knobs& k,
                bool compare = true) {
  DTW_TRACE_RUN(spec, ranks, k);
  train::HarnessOptions o;
  o.ranks = ranks;
  o.knobs = k;
  o.compare = compare;
  o.timeout = std::chrono::seconds(30);  // a wrong lab fails, never hangs
  PsRun<T> result;
  std::mutex mutex;
  bool filled = false;
  result.out = train::run_ranks<T>(spec, o, [&](train::RankRun<T>& run) {
    const PsLog log = fn(run);
    Comm& comm = run.comm();
    auto updates = allgather_results(comm, log.updates);
    auto compute = allgather_results(comm, log.compute_seconds);
    auto straggle = allgather_results(comm, log.straggle_seconds);
    // Every rank's reported pieces, in flat-buffer order.
    std::vector<T> mine;
    std::int64_t begin = -1;
    for (const auto& [b, values] : run.reported()) {
      begin = b;
      mine = values;
    }
    auto begins = allgather_results(comm, begin);
    auto pieces = allgather_results(comm, mine);
    std::lock_guard<std::mutex> lock(mutex);
    if (filled) return;
    filled = true;
    result.updates = std::move(updates);
    result.compute = std::move(compute);
    result.straggle = std::move(straggle);
    std::map<std::int64_t, std::vector<T>> by_begin;
    for (std::size_t r = 0; r < begins.size(); ++r)
      if (begins[r] >= 0) by_begin[begins[r]] = std::move(pieces[r]);
    for (auto& [b, values] : by_begin) result.params.insert(result.params.end(), values.begin(), values.end());
  });
  share_with_idle_processes(result.out.report, filled, result.updates);
  share_with_idle_processes(result.out.report, filled, result.compute);
  share_with_idle_processes(result.out.report, filled, result.straggle);
  share_with_idle_processes(result.out.report, filled, result.params);
  return result;
}

/// ps_sync / ps_async / ps_ssp as PsFn.
template <class T>
PsFn<T> sync_fn() { return [](train::RankRun<T>& r) { return ps_sync(r); }; }
template <class T>
PsFn<T> async_fn() { return [](train::RankRun<T>& r) { return ps_async(r); }; }
template <class T>
PsFn<T> ssp_fn() { return [](train::RankRun<T>& r) { return ps_ssp(r); }; }

/// Runs the server `fn` on rank 0 against W stub workers written here (ranks
/// 1 … W): each pulls (a version, then the parameters), and pushes a header
/// {0.5/W, 1, 1} and a gradient of 10⁻³ everywhere; a synchronous stub
/// pushes spec.steps times, an asynchronous one until it pulls version
/// W·steps, then sends the stop header {0, 0, 0}. `split`: the stubs take
/// part in the server's comm.split (ps_sync, ps_ssp). The server's log.
inline std::vector<PsUpdate> server_against_stub_workers(const PsFn<double>& fn,
                                                         const train::RunSpec& spec, int W,
                                                         const train::Knobs& k, bool async,
                                                         bool split) {
  const std::int64_t psi = train::reference_run<double>(spec)->layout.size();
  train::HarnessOptions o;
  o.ranks = 1 + W;
  o.knobs = k;
  o.compare = false;
  o.timeout = std::chrono::seconds(30);
  std::vector<PsUpdate> log;
  std::mutex mutex;
  bool filled = false;
  const train::RunOutcome out = train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    std::vector<PsUpdate> mine;
    if (comm.rank() == 0) {
      mine = fn(run).updates;
    } else {
      const std::unique_ptr<Comm> group = split ? comm.split(1, comm.rank()) : nullptr;
      std::vector<double> params(static_cast<std::size_t>(psi)), grads(params.size(), 1e-3);
      const std::array<double, 3> push{0.5 / W, 1, 1}, stop{0, 0, 0};
      for (std::int64_t step = 0; async || step < spec.steps; ++step) {
        std::int64_t version = 0;
        comm.recv(std::span<std::int64_t>(&version, 1), 0, kTagVersion);
        comm.recv(params, 0, kTagParams);
        if (async && version >= W * spec.steps) {
          comm.send(stop, 0, kTagHeader);
          break;
        }
        comm.send(push, 0, kTagHeader);
        comm.send(grads, 0, kTagGrads);
      }
    }
    auto all = allgather_results(comm, mine);
    std::lock_guard<std::mutex> lock(mutex);
    log = all[0];
    filled = true;
  });
  share_with_idle_processes(out.report, filled, log);
  return log;
}

/// Expects that running `fn` raises E whose message contains `text`.
template <class E, class T>
void expect_error(const PsFn<T>& fn, const train::RunSpec& spec, int ranks, const train::Knobs& k,
                  const std::string& text) {
  try {
    run_ps<T>(fn, spec, ranks, k, false);
    ADD_FAILURE() << "no error; expected one containing: " << text;
  } catch (const E& e) {
    // An unwritten step (a DTW_TODO) is not the error expected here: let it
    // through, so that dtw check counts the test as waiting on that step.
    if (std::string(e.what()).find("(NotImplemented)") != std::string::npos) throw;
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace dtw::ch03::testing
