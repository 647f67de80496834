// Step 03.2: the asynchronous server. With one worker it is the reference;
// in scripted order every push lands on exactly the version the straggler
// factors imply; in arrival order every push is applied once, in each
// worker's order, with a staleness that is never negative; the loss of
// gpt-tiny falls with 4 workers. (A divergence: pitfalls_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::async_fn;
using testing::knobs;
using testing::run_ps;
using testing::tiny;

// The asynchronous server in virtual time, written here independently of
// ArrivalScript: worker w needs f(w, k) time units for its step k; the server
// takes the earliest push (ties: the lower worker), applies it, and serves
// that worker the new version at once; a worker served version W·steps or
// later stops (its push in flight is still applied).
using Factor = std::function<double(int, std::int64_t)>;
std::vector<PsUpdate> simulate_async(int W, const Factor& f, std::int64_t steps) {
  const std::int64_t goal = W * steps;
  std::vector<double> due(static_cast<std::size_t>(W));  // < 0: stopped
  for (int w = 0; w < W; ++w) due[w] = f(w, 0);
  std::vector<std::int64_t> clock(due.size(), 0), pulled(due.size(), 0);
  std::vector<PsUpdate> out;
  for (std::int64_t version = 0;; ++version) {
    int w = -1;
    for (int v = 0; v < W; ++v)
      if (due[v] >= 0 && (w < 0 || due[v] < due[w])) w = v;
    if (w < 0) return out;
    out.push_back({.worker = w, .clock = clock[w], .pulled = pulled[w], .applied = version});
    pulled[w] = version + 1;
    due[w] = version + 1 < goal ? due[w] + f(w, ++clock[w]) : -1;
  }
}

Factor constant(std::vector<double> f) {
  return [f](int w, std::int64_t) { return f[static_cast<std::size_t>(w)]; };
}

void expect_same_updates(const std::vector<PsUpdate>& want, const std::vector<PsUpdate>& got,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].worker, want[i].worker) << what << ", update " << i;
    EXPECT_EQ(got[i].clock, want[i].clock) << what << ", update " << i;
    EXPECT_EQ(got[i].pulled, want[i].pulled) << what << ", update " << i;
    EXPECT_EQ(got[i].applied, want[i].applied) << what << ", update " << i;
  }
}

DTW_TEST_STEPS(PsAsyncServerTest, "03.2");
TEST(PsAsyncServerTest, AgainstStubWorkersEveryPushLandsWhereTheScriptPutsIt) {
  // The server alone, against workers written in the test (so this runs
  // before step 03.1's worker is written): W = 2, worker 1 three times
  // slower, 3 steps, scripted order: the log is the simulation's.
  DTW_TRACE("ps-async server against 2 stub workers, worker 1 three times slower, 3 steps, "
            "scripted order");
  const auto log = testing::server_against_stub_workers(
      async_fn<double>(), tiny("mlp-tiny", 3, 6), 2, knobs({"straggler=1:3", "order=scripted"}),
      true, false);
  expect_same_updates(simulate_async(2, constant({1, 3}), 3), log, "the server");
}

DTW_TEST_STEPS(PsAsyncTest, "03.1", "03.2");
TEST(PsAsyncTest, OneWorkerIsTheReference) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    DTW_TRACE("ps-async, " << model << ", 1 server, 1 worker");
    const auto r = run_ps<double>(async_fn<double>(), tiny(model), 2, knobs({}));
    EXPECT_TRUE(r.out.matches) << model << ": " << r.out.mismatch;
    EXPECT_EQ(r.out.losses.size(), 3u) << model;
  }
}

TEST(PsAsyncTest, TheWorkedExampleOfTheText) {
  // Two workers, worker 1 three times slower, 4 steps: 8 updates, whoever pushes.
  DTW_TRACE("ps-async, the worked example of the text: 2 workers, worker 1 three times slower, "
            "4 steps, scripted order");
  const std::vector<PsUpdate> want = {{0, 0, 0, 0}, {0, 1, 1, 1}, {0, 2, 2, 2}, {1, 0, 0, 3},
                                      {0, 3, 3, 4}, {0, 4, 5, 5}, {0, 5, 6, 6}, {1, 1, 4, 7},
                                      {0, 6, 7, 8}};
  expect_same_updates(want, simulate_async(2, constant({1, 3}), 4), "the test's own simulation");
  const auto r = run_ps<double>(async_fn<double>(), tiny("mlp-tiny", 4, 6), 3,
                                knobs({"straggler=1:3", "order=scripted"}), false);
  expect_same_updates(want, r.updates[0], "the server");
  EXPECT_EQ(r.out.losses.size(), 4u) << "a loss per round of 2 updates, for 4 rounds";
}

TEST(PsAsyncTest, ScriptedArrivalsLandOnTheVersionsTheScriptImplies) {
  for (const char* slow : {"straggler=", "straggler=2:3", "straggler=0:2,3:5", "jitter=4:0.3"}) {
    const auto r = run_ps<double>(async_fn<double>(), tiny("mlp-tiny", 5, 8), 5,
                                  knobs({slow, "order=scripted"}), false);
    const PsOptions o = ps_options(knobs({slow}));
    expect_same_updates(simulate_async(4, [&](int w, std::int64_t k) { return o.factor(w, k); }, 5),
                        r.updates[0], slow);
    EXPECT_EQ(r.out.losses.size(), 5u);
  }
}

DTW_TEST_STEPS(PsAsyncStragglerTest, "03.1", "03.2", "03.5");
TEST(PsAsyncStragglerTest, InArrivalOrderEveryPushIsAppliedOnceInItsWorkersOrder) {
  const int W = 3;
  const std::int64_t steps = 6;
  const auto r = run_ps<double>(async_fn<double>(), tiny("mlp-tiny", steps, 6), 1 + W,
                                knobs({"straggler=0:2"}), false);
  const std::vector<PsUpdate>& log = r.updates[0];
  // W·steps updates, plus at most W − 1 pushes in flight when the goal is reached.
  ASSERT_GE(log.size(), static_cast<std::size_t>(W * steps));
  ASSERT_LT(log.size(), static_cast<std::size_t>(W * steps + W));
  std::vector<std::int64_t> next(W, 0), last_pull(W, -1);
  for (std::size_t i = 0; i < log.size(); ++i) {
    const PsUpdate& u = log[i];
    ASSERT_GE(u.worker, 0);
    ASSERT_LT(u.worker, W);
    EXPECT_EQ(u.applied, static_cast<std::int64_t>(i)) << "one version per update";
    EXPECT_EQ(u.clock, next[u.worker]++) << "update " << i << ": a worker's steps in order";
    EXPECT_GE(u.applied - u.pulled, 0) << "update " << i;
    EXPECT_GT(u.pulled, last_pull[u.worker]) << "update " << i << ": a newer version each pull";
    EXPECT_LT(u.pulled, W * steps) << "update " << i << ": nobody computes past the goal";
    last_pull[u.worker] = u.pulled;
  }
  EXPECT_EQ(r.out.losses.size(), static_cast<std::size_t>(steps));
}

TEST(PsAsyncTest, AFastWorkerPushesMoreThanASlowOne) {
  // Worker 0 is 4x slower: in scripted order it pushes about a quarter as often.
  const auto r = run_ps<double>(async_fn<double>(), tiny("mlp-tiny", 8, 6), 3,
                                knobs({"straggler=0:4", "order=scripted"}), false);
  std::vector<int> pushes(2, 0);
  for (const PsUpdate& u : r.updates[0]) ++pushes[u.worker];
  EXPECT_EQ(pushes[0] + pushes[1], 16 + 1) << "16 updates and one push in flight";
  EXPECT_EQ(pushes[0], 4);
  EXPECT_EQ(pushes[1], 13);
}

TEST(PsAsyncTest, EqualWorkersAreServedAboutEquallyOften) {
  // No straggler, no script: the server takes pushes as they come. Four
  // workers of equal speed must each be served about a quarter of the time.
  // A server that always takes the lowest ready worker (comm.wait_any alone)
  // is busy enough here that worker 0 or 1 is nearly always ready: it serves
  // them over and over while workers 2 and 3 wait with stale pushes.
  const int W = 4;
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 60;
  DTW_TRACE("ps-async, gpt-tiny, " << W << " equal workers, " << spec.steps
                                   << " steps, arrival order: served about equally often");
  const auto r = run_ps<float>(async_fn<float>(), spec, 1 + W, knobs({}), false);
  std::vector<int> pushes(W, 0);
  for (const PsUpdate& u : r.updates[0]) ++pushes[static_cast<std::size_t>(u.worker)];
  const auto [fewest, most] = std::minmax_element(pushes.begin(), pushes.end());
  std::string counts;
  for (int w = 0; w < W; ++w) counts += (w ? ", " : "") + std::to_string(pushes[w]);
  EXPECT_LE(*most, 2 * *fewest)
      << "pushes served per worker: " << counts << " (worker " << fewest - pushes.begin()
      << " starved): among the workers whose headers have come, serve them in turn, starting "
         "after the worker served last, not always the lowest index that wait_any returns";
}

TEST(PsAsyncTest, TwoServersGiveTheSameTrainingAsOne) {
  // The worker's loops over servers (03.1) with S = 2, on ranges given by
  // hand so that nothing of 03.4 runs: each server applies the same pushes
  // in the same scripted order to its half, and the clip uses the worker's
  // whole norm, so the halves put together are one server's parameters.
  const train::RunSpec spec = tiny("mlp-tiny", 4, 6);
  const std::int64_t psi = train::reference_run<double>(spec)->layout.size();
  const std::string half = std::to_string(psi / 2);
  DTW_TRACE("ps-async, mlp-tiny, 2 servers on halves given by hand against 1 server, 2 workers, "
            "worker 1 three times slower, scripted order");
  const auto one = run_ps<double>(async_fn<double>(), spec, 3,
                                  knobs({"straggler=1:3", "order=scripted"}), false);
  const auto two = run_ps<double>(
      async_fn<double>(), spec, 4,
      knobs({"servers=2", "ranges=0-" + half + "," + half + "-" + std::to_string(psi),
             "straggler=1:3", "order=scripted"}),
      false);
  expect_same_updates(one.updates[0], two.updates[0], "server 0 of 2 against the only server");
  expect_same_updates(one.updates[0], two.updates[1], "server 1 of 2 against the only server");
  ASSERT_EQ(two.params.size(), one.params.size());
  for (std::size_t i = 0; i < one.params.size(); ++i)
    ASSERT_EQ(two.params[i], one.params[i])
        << "parameter " << i << ": each server clips its shard of a push by the norm of the "
        << "whole push, the Σ g² its worker sent in the header, not by its own shard's";
  // In arrival order the two servers serve different workers at once: a
  // worker blocked on its push to one server while the other sends it a
  // version is the cycle the protocol's order avoids.
  for (int run = 0; run < 3; ++run) {
    const auto live = run_ps<double>(
        async_fn<double>(), spec, 5,
        knobs({"servers=2", "ranges=0-" + half + "," + half + "-" + std::to_string(psi)}), false);
    EXPECT_GE(live.updates[0].size(), 3u * 4u) << "run " << run << ": every push applied";
    EXPECT_EQ(live.updates[0].size(), live.updates[1].size()) << "run " << run;
  }
}

TEST(PsAsyncTest, TheLossOfGptTinyFallsWithFourWorkers) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 100;
  DTW_TRACE("ps-async at the rate over W: gpt-tiny, AdamW, 4 workers, 100 steps: the loss falls");
  const auto r = run_ps<float>(async_fn<float>(), spec, 5, knobs({}), false);
  ASSERT_EQ(r.out.losses.size(), 100u);
  const double start = r.out.losses.front();
  const double end = std::accumulate(r.out.losses.end() - 10, r.out.losses.end(), 0.0) / 10;
  EXPECT_LT(end, 0.8 * start) << "loss " << start << " -> " << end << " (mean of the last 10)";
}

}  // namespace
}  // namespace dtw::ch03
