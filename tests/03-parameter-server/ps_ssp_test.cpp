// Step 03.3: stale-synchronous parallel. Staleness 0 is the synchronous
// server (the reference, and bitwise ps_sync in scripted order); every
// recorded staleness is within the bound s for s in {0, 1, 3}, in scripted
// order exactly where the script puts it (so the bound is reached, not just
// respected), and in arrival order too; an unbounded run still trains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::knobs;
using testing::run_ps;
using testing::ssp_fn;
using testing::tiny;

// SSP in virtual time, independently of ArrivalScript: the earliest push
// comes first (ties: lower worker); a clock is stepped when all W pushed it;
// a worker that pushed clock c − 1 is served clock c once version ≥ c − s, and
// then needs f(w, c) time units.
std::vector<PsUpdate> simulate_ssp(int W, const std::function<double(int, std::int64_t)>& f,
                                   std::int64_t steps, std::int64_t s) {
  std::vector<double> due(static_cast<std::size_t>(W));  // < 0: waiting to be served
  for (int w = 0; w < W; ++w) due[w] = f(w, 0);
  std::vector<std::int64_t> clock(due.size(), 0), pulled(due.size(), 0);
  std::map<std::int64_t, int> pushes;
  std::vector<PsUpdate> out;
  std::int64_t version = 0;
  while (version < steps) {
    int w = -1;
    for (int v = 0; v < W; ++v)
      if (due[v] >= 0 && (w < 0 || due[v] < due[w])) w = v;
    const double now = due[w];
    due[w] = -1;
    out.push_back({.worker = w, .clock = clock[w], .pulled = pulled[w], .applied = clock[w]});
    ++pushes[clock[w]++];
    while (pushes[version] == W) ++version;
    for (int v = 0; v < W; ++v) {
      if (due[v] < 0 && clock[v] < steps && clock[v] - s <= version) {
        pulled[v] = version;
        due[v] = now + f(v, clock[v]);
      }
    }
  }
  return out;
}

std::vector<PsUpdate> simulate_ssp(const std::vector<double>& f, std::int64_t steps,
                                   std::int64_t s) {
  return simulate_ssp(static_cast<int>(f.size()),
                      [&](int w, std::int64_t) { return f[static_cast<std::size_t>(w)]; }, steps, s);
}

std::int64_t max_staleness(const std::vector<PsUpdate>& log) {
  std::int64_t m = 0;
  for (const PsUpdate& u : log) m = std::max(m, u.applied - u.pulled);
  return m;
}

DTW_TEST_STEPS(PsSspStragglerTest, "03.1", "03.3", "03.5");
TEST(PsSspStragglerTest, StalenessZeroIsTheSynchronousServer) {
  const train::RunSpec spec = tiny("gpt-tiny");
  const auto sync = run_ps<double>(testing::sync_fn<double>(), spec, 4, knobs({}));
  const auto scripted = run_ps<double>(ssp_fn<double>(), spec, 4,
                                       knobs({"staleness=0", "order=scripted"}));
  EXPECT_TRUE(scripted.out.matches) << scripted.out.mismatch;
  ASSERT_EQ(scripted.params.size(), sync.params.size());
  EXPECT_TRUE(scripted.params == sync.params) << "the same additions in the same order";
  EXPECT_EQ(scripted.out.losses, sync.out.losses);
  // In arrival order the sums are added in another order: equal to rounding.
  const auto arrival = run_ps<double>(ssp_fn<double>(), tiny("mlp-tiny"), 4,
                                      knobs({"staleness=0", "straggler=1:2"}));
  EXPECT_TRUE(arrival.out.matches) << arrival.out.mismatch;
  EXPECT_EQ(max_staleness(arrival.updates[0]), 0);
}

DTW_TEST_STEPS(PsSspServerTest, "03.3");
TEST(PsSspServerTest, AgainstStubWorkersEveryPushLandsWhereTheBoundPutsIt) {
  // The server alone, against workers written in the test (so this runs
  // before step 03.1's worker is written): W = 2, worker 0 three times
  // slower, s = 1, 4 clocks, scripted order: the log is the simulation's.
  DTW_TRACE("ps-ssp server against 2 stub workers, staleness 1, worker 0 three times slower, "
            "scripted order");
  const auto log = testing::server_against_stub_workers(
      ssp_fn<double>(), tiny("mlp-tiny", 4, 6), 2,
      knobs({"staleness=1", "straggler=0:3", "order=scripted"}), false, true);
  const std::vector<PsUpdate> want = simulate_ssp({3, 1}, 4, 1);
  ASSERT_EQ(log.size(), want.size()) << "every worker pushes every clock once";
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(log[i] == want[i])
        << "push " << i << ": got worker " << log[i].worker << ", clock " << log[i].clock
        << ", pulled " << log[i].pulled << ", applied " << log[i].applied << "; expected worker "
        << want[i].worker << ", clock " << want[i].clock << ", pulled " << want[i].pulled
        << ", applied " << want[i].applied << " (a sum per clock, applied at its step; a worker "
        << "served once clock[v] − s ≤ version)";
}

DTW_TEST_STEPS(PsSspTest, "03.1", "03.3");
TEST(PsSspTest, ScriptedStalenessIsWhereTheScriptPutsItAndReachesTheBound) {
  const std::vector<double> f = {3, 1, 1};  // worker 0 is three times slower
  for (std::int64_t s : {0, 1, 3}) {
    DTW_TRACE("ps-ssp, mlp-tiny, 3 workers, staleness " << s
                                                      << ", worker 0 three times slower, scripted order");
    const auto r = run_ps<double>(ssp_fn<double>(), tiny("mlp-tiny", 8, 6), 4,
                                  knobs({"staleness=" + std::to_string(s), "straggler=0:3",
                                         "order=scripted"}),
                                  s == 0);
    const std::vector<PsUpdate> want = simulate_ssp(f, 8, s);
    const std::vector<PsUpdate>& got = r.updates[0];
    ASSERT_EQ(got.size(), want.size()) << "s=" << s;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].worker, want[i].worker) << "s=" << s << ", push " << i;
      EXPECT_EQ(got[i].clock, want[i].clock) << "s=" << s << ", push " << i;
      EXPECT_EQ(got[i].pulled, want[i].pulled) << "s=" << s << ", push " << i;
      EXPECT_EQ(got[i].applied, want[i].applied) << "s=" << s << ", push " << i;
    }
    EXPECT_EQ(max_staleness(got), s) << "the straggler lets the others run s clocks ahead";
    EXPECT_EQ(r.out.losses.size(), 8u) << "one step, and one loss, per clock";
    if (s == 0) {
      EXPECT_TRUE(r.out.matches) << r.out.mismatch;
    }
  }
}

TEST(PsSspStragglerTest, InArrivalOrderEveryStalenessIsWithinTheBound) {
  for (std::int64_t s : {0, 1, 3}) {
    const auto r = run_ps<double>(ssp_fn<double>(), tiny("mlp-tiny", 8, 6), 4,
                                  knobs({"staleness=" + std::to_string(s), "straggler=0:2"}),
                                  s == 0);
    const std::vector<PsUpdate>& log = r.updates[0];
    ASSERT_EQ(log.size(), 24u) << "s=" << s;
    for (const PsUpdate& u : log) {
      EXPECT_LE(u.applied - u.pulled, s) << "s=" << s << ": worker " << u.worker << ", clock "
                                         << u.clock;
      EXPECT_GE(u.applied - u.pulled, 0);
      EXPECT_EQ(u.applied, u.clock) << "a clock's pushes are applied at its step";
    }
    if (s == 0) {
      EXPECT_TRUE(r.out.matches) << r.out.mismatch;
    }
  }
}

TEST(PsSspTest, JitterIsAbsorbedWithinTheBound) {
  // Every worker is 4x slower on about a third of its steps: the others run
  // ahead instead of waiting, never more than s clocks.
  const PsOptions o = ps_options(knobs({"jitter=4:0.3"}));
  const auto r = run_ps<double>(ssp_fn<double>(), tiny("mlp-tiny", 10, 6), 4,
                                knobs({"staleness=2", "jitter=4:0.3", "order=scripted"}), false);
  EXPECT_EQ(r.updates[0],
            simulate_ssp(3, [&](int w, std::int64_t k) { return o.factor(w, k); }, 10, 2));
  EXPECT_EQ(max_staleness(r.updates[0]), 2);
}

TEST(PsSspTest, AnUnboundedRunNeverHoldsAWorker) {
  const auto r = run_ps<double>(ssp_fn<double>(), tiny("mlp-tiny", 8, 6), 4,
                                knobs({"staleness=inf", "straggler=0:3", "order=scripted"}), false);
  ASSERT_EQ(r.updates[0].size(), 24u);
  // The fast workers run through all 8 clocks while the straggler is on its
  // third: their last pushes were computed on version 2 and applied at 7.
  EXPECT_EQ(r.updates[0], simulate_ssp({3, 1, 1}, 8, PsOptions::kUnbounded));
  EXPECT_EQ(max_staleness(r.updates[0]), 5);
  EXPECT_TRUE(std::isfinite(r.out.losses.back()));
}

}  // namespace
}  // namespace dtw::ch03
