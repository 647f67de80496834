// Step 03.4: sharded servers. The shards tile the model in nearly equal
// contiguous ranges; the synchronous server matches the reference for (S, W)
// = (2, 3) and (3, 4); sharded equals unsharded bit for bit (synchronous with
// clipping off, asynchronous in scripted order); and each server's link
// carries exactly 2·W·Ψ_s values (plus W versions and headers) per step, from the
// traffic matrix, so S = 2 halves the busiest link; servers hold their shard's
// optimizer state, workers none.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "dtw/memory.h"
#include "dtw/model/params.h"
#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::knobs;
using testing::run_ps;
using testing::tiny;

DTW_TEST_STEPS(ShardLayoutTest, "03.4");
TEST(ShardLayoutTest, ShardsTileTheModelInNearlyEqualContiguousRanges) {
  for (std::int64_t psi : {7, 10, 1000003}) {
    for (int S : {2, 3, 7}) {
      DTW_TRACE("ps_layout, " << psi << " parameters over " << S << " servers");
      const PsLayout l = ps_layout(S + 2, psi, ps_options(knobs({"servers=" + std::to_string(S)})));
      ASSERT_EQ(l.shards.size(), static_cast<std::size_t>(S)) << "one shard per server";
      EXPECT_EQ(l.workers, 2);
      std::int64_t next = 0;
      for (int s = 0; s < S; ++s) {
        const train::Range r = l.shards[s];
        EXPECT_EQ(r.begin, next) << psi << " parameters, S " << S << ": shard " << s
                                 << " must start where shard " << s - 1 << " ends";
        EXPECT_TRUE(r.size() == psi / S || r.size() == psi / S + 1)
            << psi << " parameters, S " << S << ": shard " << s << " holds " << r.size()
            << "; every shard holds Ψ/S or Ψ/S + 1";
        next = r.end;
      }
      EXPECT_EQ(next, psi) << "the shards end at " << next << ", so parameters [" << next << ", "
                           << psi << ") are owned by no server: the Ψ mod S left over must go to "
                           << "the first servers, one each";
    }
  }
}

TEST(ShardLayoutTest, TheFirstPsiModSShardsAreTheLongerOnes) {
  // The contract's layout, the one the cost model and dtw::Chunks use.
  const std::vector<std::tuple<std::int64_t, int, std::vector<train::Range>>> cases = {
      {10, 3, {{0, 4}, {4, 7}, {7, 10}}},
      {11, 4, {{0, 3}, {3, 6}, {6, 9}, {9, 11}}},
      {9, 3, {{0, 3}, {3, 6}, {6, 9}}},
      {5, 5, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}}};
  for (const auto& [psi, S, want] : cases) {
    DTW_TRACE("ps_layout, " << psi << " parameters over " << S
                            << " servers: the first Ψ mod S shards one longer");
    const PsLayout l = ps_layout(S + 1, psi, ps_options(knobs({"servers=" + std::to_string(S)})));
    ASSERT_EQ(l.shards.size(), want.size());
    for (std::size_t s = 0; s < want.size(); ++s)
      EXPECT_TRUE(l.shards[s].begin == want[s].begin && l.shards[s].end == want[s].end)
          << psi << " parameters over " << S << " servers: shard " << s << " is ["
          << l.shards[s].begin << ", " << l.shards[s].end << "), expected [" << want[s].begin
          << ", " << want[s].end << "): the first Ψ mod S servers hold one parameter more";
  }
}

TEST(ShardLayoutTest, TheServersAddTheirSumsOfSquares) {
  // Server s's shard has Σ g² = s + 1: every server gets the whole sum of
  // squares (not a norm, not the largest, not a mean), the same on each.
  for (int S : {2, 3, 4}) {
    DTW_TRACE("global_sum_of_squares over " << S << " servers, server s's sum s + 1");
    dtw::testing::launch_bounded(S, [&](Comm& servers) {
      const double got = global_sum_of_squares(servers, servers.rank() + 1.0);
      const double want = S * (S + 1) / 2.0;
      EXPECT_EQ(got, want) << "server " << servers.rank() << " of " << S
                           << ": the servers' sums of squares add up (over disjoint shards, "
                              "squares add; norms do not), and each server returns that sum";
    });
  }
}

DTW_TEST_STEPS(PsShardTest, "03.1", "03.2", "03.3", "03.4");
TEST(PsShardTest, ShardedSynchronousServersMatchTheReference) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (auto [S, W] : {std::pair{2, 3}, std::pair{3, 4}}) {
      DTW_TRACE("ps-sync, " << model << ", " << S << " servers, " << W << " workers");
      const auto r = run_ps<double>(testing::sync_fn<double>(), tiny(model), S + W,
                                    knobs({"servers=" + std::to_string(S)}));
      EXPECT_TRUE(r.out.matches) << model << ", S=" << S << ", W=" << W << ": " << r.out.mismatch;
      EXPECT_EQ(r.out.compared, train::reference_run<double>(tiny(model))->layout.size())
          << "the shards together are the model";
    }
  }
}

TEST(PsShardTest, ShardedEqualsUnshardedBitForBit) {
  // Synchronous: with clipping off nothing depends on how the norm's sum is
  // split, and every element is the same sum of the same pushes.
  train::RunSpec spec = tiny("gpt-tiny");
  spec.clip_norm = 0;
  const auto one = run_ps<double>(testing::sync_fn<double>(), spec, 4, knobs({}));
  const auto three = run_ps<double>(testing::sync_fn<double>(), spec, 6, knobs({"servers=3"}));
  ASSERT_EQ(one.params.size(), three.params.size());
  EXPECT_TRUE(one.params == three.params);
  EXPECT_EQ(one.out.losses, three.out.losses);
  // Asynchronous: each push is clipped by the norm its worker sent, so the
  // shards step exactly as one server would, in the same scripted order.
  const train::Knobs k = knobs({"straggler=1:2", "order=scripted"});
  const auto a1 = run_ps<double>(testing::async_fn<double>(), tiny("gpt-tiny"), 4, k, false);
  train::Knobs k2 = k;
  k2.set("servers", "2");
  const auto a2 = run_ps<double>(testing::async_fn<double>(), tiny("gpt-tiny"), 5, k2, false);
  EXPECT_TRUE(a1.params == a2.params);
  EXPECT_EQ(a1.out.losses, a2.out.losses);
}

TEST(PsShardTest, EachServersLinkCarriesTwoWPsiOverSPerStep) {
  const train::RunSpec spec = tiny("mlp-tiny", 3, 6);
  const std::int64_t psi = model::param_layout(spec.config()).size();
  const int W = 3;
  std::int64_t busiest[4] = {};
  for (int S : {1, 2, 3}) {
    const auto r = run_ps<double>(testing::sync_fn<double>(), spec, S + W,
                                  knobs({"servers=" + std::to_string(S)}));
    const PsLayout l = ps_layout(S + W, psi, ps_options(knobs({"servers=" + std::to_string(S)})));
    const TrafficMatrix& traffic = r.out.report.traffic;
    for (int s = 0; s < S; ++s) {
      std::int64_t link = 0;
      for (int w = 0; w < W; ++w)
        link += traffic.bytes(s, l.worker_rank(w)) + traffic.bytes(l.worker_rank(w), s);
      // Per step: W·Ψ_s values out (pulls) and W·Ψ_s in (pushes), W versions
      // out (one int64 each) and W headers in (three doubles each).
      const std::int64_t want = spec.steps * (2 * W * l.shards[s].size() * 8 + W * (8 + 24));
      EXPECT_EQ(link, want) << "S=" << S << ", server " << s;
      busiest[S] = std::max(busiest[S], link);
    }
    for (int a = S; a < S + W; ++a)
      for (int b = S; b < S + W; ++b) EXPECT_EQ(traffic.bytes(a, b), 0) << "workers never talk";
  }
  // Sharding over S servers divides the busiest link by S (up to rounding of Ψ/S).
  EXPECT_NEAR(static_cast<double>(busiest[1]) / busiest[2], 2.0, 0.01);
  EXPECT_NEAR(static_cast<double>(busiest[1]) / busiest[3], 3.0, 0.01);
}

TEST(PsShardTest, ServersHoldTheirShardsOptimizerStateAndWorkersNone) {
  const train::RunSpec spec = tiny("mlp-tiny", 4, 6);
  const std::int64_t psi = model::param_layout(spec.config()).size();
  const train::Knobs k = knobs({"servers=2", "staleness=1", "straggler=0:2", "order=scripted"});
  const PsLayout l = ps_layout(5, psi, ps_options(k));
  for (bool ssp : {false, true}) {
    const auto r = run_ps<double>(ssp ? testing::ssp_fn<double>() : testing::sync_fn<double>(),
                                  spec, 5, k, !ssp);
    const auto& memory = r.out.report.memory;
    ASSERT_EQ(memory.size(), 5u);
    for (int s = 0; s < 2; ++s) {
      const std::int64_t shard = l.shards[s].size() * 8;
      EXPECT_EQ(memory[s].peak_of(MemoryCategory::kParameters), shard) << "server " << s;
      EXPECT_EQ(memory[s].peak_of(MemoryCategory::kOptimizerState), 2 * shard) << "AdamW: m and v";
      const std::int64_t sums = memory[s].peak_of(MemoryCategory::kCommBuffers);
      if (ssp) {
        // The straggler keeps a clock open while the others push the next.
        EXPECT_EQ(sums, 2 * shard) << "s = 1: at most two clocks in flight, and here two";
      } else {
        EXPECT_EQ(sums, 0);
      }
    }
    for (int w = 2; w < 5; ++w) {
      EXPECT_EQ(memory[w].peak_of(MemoryCategory::kParameters), psi * 8) << "a worker's copy";
      EXPECT_EQ(memory[w].peak_of(MemoryCategory::kOptimizerState), 0) << "workers never step";
    }
  }
}

DTW_TEST_STEPS(PsShardStragglerTest, "03.1", "03.2", "03.3", "03.4", "03.5");
TEST(PsShardStragglerTest, ShardedServersWorkForEveryStrategy) {
  for (const char* order : {"order=arrival", "order=scripted"}) {
    const train::Knobs k = knobs({"servers=2", "staleness=1", "straggler=0:2", order});
    const auto a = run_ps<double>(testing::async_fn<double>(), tiny("mlp-tiny", 4, 6), 5, k, false);
    const auto s = run_ps<double>(testing::ssp_fn<double>(), tiny("mlp-tiny", 4, 6), 5, k, false);
    for (int server : {0, 1}) {
      EXPECT_GE(a.updates[server].size(), 12u) << order;
      EXPECT_LE(a.updates[server].size(), 14u) << order << ": at most W − 1 pushes in flight";
      EXPECT_EQ(s.updates[server].size(), 12u) << order;
      for (const PsUpdate& u : s.updates[server]) EXPECT_LE(u.applied - u.pulled, 1) << order;
    }
    EXPECT_EQ(a.out.losses.size(), 4u);
    EXPECT_EQ(s.out.losses.size(), 4u);
  }
}

}  // namespace
}  // namespace dtw::ch03
