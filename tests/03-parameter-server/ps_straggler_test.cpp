// Step 03.5: stragglers. A worker told it is f times slower really sleeps
// (f − 1) times its compute time (measured around the sleep, not taken from
// the request), the others do not sleep, jitter slows the share of steps it
// names, under order=scripted nobody sleeps
// (the order is decided in virtual time already), and a slow worker changes
// the synchronous server's time, never its result. The workers here run
// against a minimal server written in the test, so this step is checked on
// its own.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <vector>

#include "dtw/model/params.h"
#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::knobs;
using testing::tiny;

// Rank 0 serves every step's parameters and takes every push (the protocol of
// the contract, nothing learned from it); ranks 1 … W run ps_worker.
// Returns each worker's log, by worker.
// With `early`, the stub answers each push with the next step's parameters
// as soon as the header has come, before it takes the gradient: legal for a
// server, since the worker posts its next pull before it waits for its pushes.
std::vector<PsLog> workers_against_a_stub(int W, const train::Knobs& k,
                                          const train::RunSpec& spec = tiny("mlp-tiny", 3, 6),
                                          bool early = false) {
  const std::int64_t psi = model::param_layout(spec.config()).size();
  train::HarnessOptions o;
  o.ranks = 1 + W;
  o.knobs = k;
  o.compare = false;
  o.timeout = std::chrono::seconds(30);
  std::vector<std::vector<double>> seconds;  // by rank: {compute, straggle}
  std::mutex mutex;
  bool filled = false;
  const train::RunOutcome out = train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    const PsOptions options = ps_options(run.knobs());
    const PsLayout layout = ps_layout(comm.size(), psi, options);
    PsLog mine;
    if (comm.rank() == 0) {
      std::vector<double> params(static_cast<std::size_t>(psi), 0.01), grads(params.size());
      std::vector<double> header(3);
      const auto serve = [&](std::int64_t version, int w) {
        comm.send(std::span<const std::int64_t>(&version, 1), layout.worker_rank(w), kTagVersion);
        comm.send(params, layout.worker_rank(w), kTagParams);
      };
      if (early)
        for (int w = 0; w < W; ++w) serve(0, w);
      for (std::int64_t step = 0; step < spec.steps; ++step)
        for (int w = 0; w < W; ++w) {
          if (!early) serve(step, w);
          comm.recv(header, layout.worker_rank(w), kTagHeader);
          if (early && step + 1 < spec.steps) serve(step + 1, w);
          comm.recv(grads, layout.worker_rank(w), kTagGrads);
        }
    } else {
      mine = ps_worker(run, layout, options, WorkerMode::kSynchronous);
    }
    const auto all = allgather_results(comm, std::vector<double>{mine.compute_seconds,
                                                                 mine.straggle_seconds});
    std::lock_guard<std::mutex> lock(mutex);
    seconds = all;
    filled = true;
  });
  testing::share_with_idle_processes(out.report, filled, seconds);
  std::vector<PsLog> logs(static_cast<std::size_t>(W));
  for (int w = 0; w < W && w + 1 < static_cast<int>(seconds.size()); ++w) {
    logs[static_cast<std::size_t>(w)].compute_seconds = seconds[static_cast<std::size_t>(w) + 1][0];
    logs[static_cast<std::size_t>(w)].straggle_seconds = seconds[static_cast<std::size_t>(w) + 1][1];
  }
  return logs;
}

DTW_TEST_STEPS(PsWorkerTest, "03.1");
TEST(PsWorkerTest, TheNextPullIsPostedBeforeWaitingForThePushes) {
  DTW_TRACE("2 workers against a stub server that answers each push with the next parameters "
            "before it takes the gradient (the pull must be posted before waiting for the pushes)");
  const std::vector<PsLog> logs = workers_against_a_stub(2, knobs({}), tiny("mlp-tiny", 3, 6), true);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_GT(logs[0].compute_seconds, 0.0);
  EXPECT_GT(logs[1].compute_seconds, 0.0);
}

DTW_TEST_STEPS(StraggleTest, "03.5");
TEST(StraggleTest, WaitsTheFactorMinusOneTimesTheComputeTimeAndSaysHowLong) {
  using Seconds = std::chrono::duration<double>;
  for (const double f : {1.5, 3.0}) {
    for (const double c : {0.0007, 0.004, 0.02, 0.1}) {
      DTW_TRACE("ps_straggle(" << f << ", " << c * 1000 << " ms of compute)");
      const auto start = std::chrono::steady_clock::now();
      const double got = ps_straggle(f, Seconds(c));
      const double took = Seconds(std::chrono::steady_clock::now() - start).count();
      EXPECT_GE(got, (f - 1) * c * 0.999)
          << "returned " << got * 1000 << " ms: a worker " << f << " times slower waits (f − 1) × "
          << c * 1000 << " ms = " << (f - 1) * c * 1000 << " ms (a wait may run over, never "
          << "short; a wait in whole milliseconds is none for a short step)";
      EXPECT_GE(took, (f - 1) * c * 0.999)
          << "the call took " << took * 1000 << " ms: it must really wait (f − 1) × compute";
      EXPECT_LE(got, took * 1.0001 + 1e-6)
          << "returned " << got * 1000 << " ms but the call took " << took * 1000
          << " ms: return the time measured around the wait, not the time asked for";
      // Nor much longer: half a compute time of slack for what a loaded
      // machine's sleep overshoots, checked where that is 50 ms.
      if (c >= 0.1) {
        EXPECT_LE(got, (f - 1) * c + 0.5 * c)
            << "returned " << got * 1000 << " ms for (f − 1) × compute = " << (f - 1) * c * 1000
            << " ms: the worker has already computed once, so it waits f − 1 times, not f, and "
            << "the return is in seconds";
      }
    }
  }
  EXPECT_LT(ps_straggle(1.0, Seconds(0.01)), 0.004) << "slowdown 1: no wait";
}

DTW_TEST_STEPS(PsStragglerTest, "03.1", "03.5");
TEST(PsStragglerTest, EveryStragglerSleepsItsFactorMinusOneTimesItsComputeTime) {
  DTW_TRACE("2 workers against a stub server, straggler=0:3,1:1.5");
  // Steps long enough that one late wake-up from a sleep (milliseconds on a
  // loaded machine) cannot pass for the sleeps of all the other steps: a
  // worker that keeps only its last sleep must fall short.
  const std::vector<PsLog> logs =
      workers_against_a_stub(2, knobs({"straggler=0:3,1:1.5"}), tiny("gpt-tiny", 8, 24));
  ASSERT_EQ(logs.size(), 2u);
  // sleep_for never returns early, so the measured sleeps are at least (f − 1)× the compute.
  EXPECT_GT(logs[0].compute_seconds, 0.0);
  EXPECT_GE(logs[0].straggle_seconds, 2 * logs[0].compute_seconds * 0.999)
      << "worker 0 computed " << logs[0].compute_seconds << " s and slept "
      << logs[0].straggle_seconds << " s";
  EXPECT_GE(logs[1].straggle_seconds, 0.5 * logs[1].compute_seconds * 0.999)
      << "worker 1 computed " << logs[1].compute_seconds << " s and slept "
      << logs[1].straggle_seconds << " s";
}

TEST(PsStragglerTest, OnlyStragglersSleepAndNeverUnderScriptedOrder) {
  DTW_TRACE("3 workers against a stub server, straggler=1:2, then scripted order");
  std::vector<PsLog> logs = workers_against_a_stub(3, knobs({"straggler=1:2"}));
  EXPECT_EQ(logs[0].straggle_seconds, 0.0);
  EXPECT_GT(logs[1].straggle_seconds, 0.0);
  EXPECT_EQ(logs[2].straggle_seconds, 0.0);
  logs = workers_against_a_stub(2, knobs({"straggler=0:4,1:4", "order=scripted"}));
  EXPECT_EQ(logs[0].straggle_seconds, 0.0);
  EXPECT_EQ(logs[1].straggle_seconds, 0.0);
}

TEST(PsStragglerTest, ASlowWorkerChangesTheTimeNeverTheResult) {
  const auto r = testing::run_ps<double>(testing::sync_fn<double>(), tiny("gpt-tiny", 3, 6), 3,
                                         knobs({"straggler=1:3"}));
  EXPECT_TRUE(r.out.matches) << r.out.mismatch;
  EXPECT_EQ(r.straggle[1], 0.0) << "worker 0 is not a straggler";
  EXPECT_GE(r.straggle[2], 2 * r.compute[2] * 0.999);
}

DTW_TEST_STEPS(StragglerPlanTest);
TEST(StragglerPlanTest, JitterSlowsTheShareOfStepsItNamesTheSameOnEveryRun) {
  const PsOptions o = ps_options(knobs({"jitter=3:0.25", "straggler=1:5"}));
  int slow = 0;
  for (int w = 0; w < 4; ++w)
    for (std::int64_t k = 0; k < 1000; ++k) {
      const double f = o.factor(w, k);
      EXPECT_EQ(f, o.factor(w, k));
      if (w == 1) {
        EXPECT_EQ(f, 5.0) << "a straggler's own factor wins when larger";
      } else {
        EXPECT_TRUE(f == 1.0 || f == 3.0);
        slow += f == 3.0;
      }
    }
  EXPECT_NEAR(slow / 3000.0, 0.25, 0.03);
}

}  // namespace
}  // namespace dtw::ch03
