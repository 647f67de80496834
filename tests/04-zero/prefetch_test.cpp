// Step 04.4, ZeRO-3 with prefetch: the same results and the same bytes as
// without, gathers started ahead in the order the first pass recorded, at
// most the shard plus 1 + depth units (and the borrowed embedding) whole, and
// a negative depth refused on every rank.
#include <algorithm>
#include <regex>
#include <set>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::on;
using testing::tiny;

train::RunOutcome run_prefetch(const train::RunSpec& spec, int p, std::vector<std::string> knobs) {
  return train::run_ranks<double>(spec, on(p, std::move(knobs)),
                                  [](train::RankRun<double>& run) { zero3_prefetch(run); });
}

DTW_TEST_STEPS(Zero3PrefetchTest, "04.1", "04.2", "04.3", "04.4");
TEST(Zero3PrefetchTest, GathersAheadInTheRecordedOrder) {
  for (int depth : {1, 2}) {
    DTW_TRACE("zero3 prefetch=" << depth << " by hand on 3 ranks (mlp-tiny): the next units of "
                                 "the recorded order gathered ahead, never past the pass's end");
    dtw::testing::launch_bounded(3, [depth](Comm& comm) {
      const train::RunSpec spec = tiny("mlp-tiny", 1);
      const Sharding sharding = Sharding::of(spec, comm.size());
      train::Replica<double> replica(spec, comm.exec(),
                                     train::ReplicaPlan::ranges(testing::owned_ranges(spec, comm.size(), comm.rank())));
      train::Replica<double> whole(spec, comm.exec(), train::ReplicaPlan::whole(spec));
      GatheredParams<double> params(comm, sharding, replica, depth);
      // An MLP's pass: every unit forward, then backward from the last.
      const int n = static_cast<int>(sharding.units().size());
      std::vector<int> order;
      for (int u = 0; u < n; ++u) order.push_back(u);
      for (int u = n - 1; u >= 0; --u) order.push_back(u);
      const int len = static_cast<int>(order.size());
      for (int pass = 0; pass < 3; ++pass) {
        params.begin_pass();
        for (int i = 0; i < len; ++i) {
          const int u = order[static_cast<std::size_t>(i)];
          const model::Unit& unit = sharding.units()[static_cast<std::size_t>(u)];
          const double* got = nullptr;
          try {
            got = params.params(u);
          } catch (const std::out_of_range& e) {
            FAIL() << "depth " << depth << ", pass " << pass << ", position " << i << " of " << len
                   << ": the prefetch window read past the end of the recorded order (" << e.what()
                   << "); it must stop at the pass's last position";
          }
          // Whole and right, whether it was gathered now or ahead.
          const std::span<double> expected = whole.params(unit.begin, unit.end);
          for (std::int64_t k = 0; k < unit.size(); ++k)
            ASSERT_EQ(got[k], expected[static_cast<std::size_t>(k)])
                << "pass " << pass << ", " << unit.name << "[" << k << "]";
          // The first pass only records. Later, the units of the next `depth`
          // positions (not past the pass's end) are on their way, except the
          // one held now: at the turn the next position is this same unit.
          std::set<int> ahead;
          for (int j = i + 1; pass > 0 && j <= std::min(i + depth, len - 1); ++j)
            if (order[static_cast<std::size_t>(j)] != u)
              ahead.insert(order[static_cast<std::size_t>(j)]);
          EXPECT_EQ(params.live_units(), 1 + static_cast<int>(ahead.size()))
              << "depth " << depth << ", pass " << pass << ", position " << i
              << ": units whole or on their way = the one held + the distinct units of positions "
                 "i+1 .. min(i+depth, end of the pass) not held now (the first pass only records)";
          params.release(u);
        }
      }
      EXPECT_EQ(params.live_units(), 0);
    });
  }
}

TEST(Zero3PrefetchTest, MatchesTheReferenceOnOneToFiveRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p = 1; p <= 5; ++p) {
      const train::RunSpec spec = tiny(model);
      const int depth = p % 2 == 0 ? 2 : 1;
      DTW_TRACE("zero3 prefetch=" << depth << ", " << ::dtw::testing::describe_run(spec, p));
      const train::RunOutcome out = run_prefetch(spec, p, {"prefetch=" + std::to_string(depth)});
      EXPECT_TRUE(out.matches) << testing::where(spec, p) << ", depth " << depth << ": "
                               << out.mismatch;
      EXPECT_EQ(out.losses.size(), 3u) << testing::where(spec, p);
      EXPECT_EQ(out.compared, testing::units_of(spec).back().end) << testing::where(spec, p);
    }
  }
}

TEST(Zero3PrefetchTest, MatchesTheReferenceWithMicroBatchesAndADeepWindow) {
  // Every micro-batch is a pass: the window restarts at each, and a depth
  // larger than the pass is cut at its end.
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const train::RunOutcome out = run_prefetch(spec, 3, {"prefetch=50", "micro_batches=2"});
  EXPECT_TRUE(out.matches) << out.mismatch;
}

TEST(Zero3PrefetchTest, SendsExactlyWhatZero3Sends) {
  // Prefetch changes when a gather starts, never what it moves: the traffic
  // matrix equals zero3's peer by peer, and the formula of step 04.3.
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p : {3, 5}) {
      const train::RunSpec spec = tiny(model, 2);
      const train::RunOutcome plain = testing::run_stage(3, spec, on(p));
      const train::RunOutcome ahead = run_prefetch(spec, p, {"prefetch=2"});
      ASSERT_TRUE(ahead.matches) << ahead.mismatch;
      for (int r = 0; r < p; ++r) {
        const std::string at = testing::where(spec, p) + ", rank " + std::to_string(r);
        const std::span<const Link> ahead_links = ahead.report.traffic.links_from(r);
        const std::span<const Link> plain_links = plain.report.traffic.links_from(r);
        EXPECT_TRUE(std::ranges::equal(ahead_links, plain_links)) << at;
        EXPECT_EQ(testing::bytes_sent(ahead.report, r), 2 * testing::bytes_per_step(spec, 3, p, r))
            << at;
      }
    }
  }
}

TEST(Zero3PrefetchTest, HoldsAtMostTheShardPlusTheUnitsInFlight) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int depth : {1, 2}) {
      const train::RunSpec spec = tiny(model, 2);
      const int p = 3;
      const train::RunOutcome out = run_prefetch(spec, p, {"prefetch=" + std::to_string(depth)});
      const std::vector<model::Unit> units = testing::units_of(spec);
      const bool tied = model::head_is_tied(spec.config());
      std::int64_t largest = 0;
      for (const model::Unit& u : units) largest = std::max(largest, u.size());
      for (int r = 0; r < p; ++r) {
        const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
        const std::int64_t peak = m.peak_of(MemoryCategory::kParameters);
        const std::int64_t shard = testing::owned(spec, p, r);
        const std::string at = testing::where(spec, p) + ", depth " + std::to_string(depth) +
                               ", rank " + std::to_string(r);
        // 1 + depth units whole, plus the embedding a tied head borrows.
        EXPECT_LE(peak, 8 * (shard + (1 + depth) * largest + (tied ? units[0].size() : 0))) << at;
        // And it really gathers ahead: more than ZeRO-3 without prefetch holds.
        EXPECT_GT(peak, 8 * (shard + testing::gathered_peak(spec))) << at;
        // Gradients and optimizer state are step 04.3's, unchanged.
        EXPECT_EQ(m.peak_of(MemoryCategory::kGradients),
                  8 * (shard + testing::gradient_buffers_peak(spec)))
            << at;
        EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), 2 * 8 * shard) << at;
      }
    }
  }
}

TEST(Zero3PrefetchTest, APassThatLeavesTheRecordedOrderIsNamed) {
  try {
    dtw::testing::launch_bounded(2, [](Comm& comm) {
      const train::RunSpec spec = tiny("mlp-tiny", 1);
      const Sharding sharding = Sharding::of(spec, comm.size());
      train::Replica<double> replica(spec, comm.exec(),
                                     train::ReplicaPlan::ranges(testing::owned_ranges(spec, comm.size(), comm.rank())));
      GatheredParams<double> params(comm, sharding, replica, 1);
      params.begin_pass();
      params.params(0);
      params.release(0);
      params.params(1);
      params.release(1);
      params.begin_pass();
      params.params(1);  // the first pass began with unit 0
    });
    FAIL() << "a pass in another order was not caught";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("prefetch needs the same order in every pass"), std::string::npos) << what;
    EXPECT_NE(what.find("call 0 of this pass"), std::string::npos) << what;
  }
}

DTW_TEST_STEPS(Zero3PrefetchArgumentsTest, "04.1", "04.2", "04.3");
TEST(Zero3PrefetchArgumentsTest, ANegativeDepthIsRefusedNamingTheRankAndValue) {
  try {
    run_prefetch(tiny("gpt-tiny", 1), 3, {"prefetch=-2"});
    FAIL() << "prefetch=-2 was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    // Whichever rank reports first, it names itself and the value.
    EXPECT_TRUE(std::regex_search(
        what, std::regex("rank [0-2]: ZeRO: prefetch depth -2 must not be negative")))
        << what;
  }
  // Depth 0 is ZeRO-3 itself: the same peak as zero3.
  const train::RunSpec spec = tiny("gpt-tiny", 1);
  const train::RunOutcome out = run_prefetch(spec, 2, {"prefetch=0"});
  EXPECT_TRUE(out.matches) << out.mismatch;
  EXPECT_EQ(out.report.memory[0].peak_of(MemoryCategory::kParameters),
            8 * (testing::owned(spec, 2, 0) + testing::gathered_peak(spec)));
}

}  // namespace
}  // namespace dtw::ch04
