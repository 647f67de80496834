// Who owns what (Sharding) and what a run may be asked to do (ZeroOptions):
// uneven chunks follow chapter 01's Chunks, a unit plan that leaves
// parameters unowned or owned twice is refused, and bad options are clear
// errors on every rank before any message, never a hang.
#include <regex>
#include <string>

#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::on;
using testing::tiny;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

DTW_TEST_STEPS(ShardingTest, "04.1");  // Sharding::shard and owned are 04.1
TEST(ShardingTest, ShardsTileEveryUnitInRankOrderWhateverItsSize) {
  // Rank r's shard starts where rank r-1's ends (chunk r starts at
  // Chunks::offset(r), which is not r times its own size when the unit does
  // not divide), and the shards together are the unit, once.
  DTW_TRACE("shards of units of 0 to 11 elements over 1 to 5 ranks");
  for (std::int64_t n = 0; n <= 11; ++n) {
    for (int p = 1; p <= 5; ++p) {
      const Sharding s({{"a", 0, 3}, {"b", 3, 3 + n}}, 3 + n, p);
      const Chunks c(n, p);
      std::int64_t next = 3;
      for (int r = 0; r < p; ++r) {
        const train::Range got = s.shard(1, r);
        ASSERT_EQ(got.begin, next)
            << "unit b = [3, " << 3 + n << ") over " << p << " ranks: rank " << r
            << "'s shard must start where rank " << r - 1 << "'s ends (the unit's begin + "
            << "Chunks::offset(r); the first n % p chunks are one longer)";
        ASSERT_EQ(got.size(), c.size(r)) << "unit b of " << n << " over " << p << " ranks, rank " << r;
        next = got.end;
      }
      ASSERT_EQ(next, 3 + n) << "unit b of " << n << " over " << p << " ranks: the shards must end at the unit's end";
    }
  }
}

TEST(ShardingTest, EveryUnitIsCutIntoChunksTheFirstRanksLonger) {
  const Sharding s({{"a", 0, 10}, {"b", 10, 16}}, 16, 4);
  // a: 3 3 2 2; b: 2 2 1 1.
  EXPECT_EQ(s.shard(0, 0).begin, 0);
  EXPECT_EQ(s.shard(0, 1).begin, 3);
  EXPECT_EQ(s.shard(0, 3).end, 10);
  EXPECT_EQ(s.shard(1, 2).begin, 14);
  EXPECT_EQ(s.shard(1, 2).size(), 1);
  EXPECT_EQ(s.owned_elements(0), 5);
  EXPECT_EQ(s.owned_elements(3), 3);
  ASSERT_EQ(s.owned(1).size(), 2u);
  EXPECT_EQ(s.owned(1)[1].begin, 12);
  EXPECT_EQ(s.unit_of(10, 16), 1);
  EXPECT_NE(error_of([&] { s.unit_of(0, 5); }).find("[0, 5) is not a unit"), std::string::npos);
}

TEST(ShardingTest, AUnitSmallerThanTheWorldLeavesRanksEmpty) {
  const Sharding s({{"tiny", 0, 2}}, 2, 5);
  EXPECT_EQ(s.owned(1).size(), 1u);
  EXPECT_TRUE(s.owned(2).empty());
  EXPECT_EQ(s.owned_elements(4), 0);
}

DTW_TEST_STEPS(ShardingArgumentsTest);  // the constructor's checks run no lab code
TEST(ShardingArgumentsTest, AUnitPlanThatLeavesParametersUnownedIsRefused) {
  EXPECT_NE(error_of([] { Sharding({{"a", 0, 10}, {"b", 12, 20}}, 20, 2); })
                .find("the unit plan leaves [10, 12) unowned (before unit b)"),
            std::string::npos);
  EXPECT_NE(error_of([] { Sharding({{"a", 0, 10}}, 20, 2); })
                .find("the unit plan leaves [10, 20) unowned (the model has 20 parameters)"),
            std::string::npos);
  EXPECT_NE(error_of([] { Sharding({{"a", 0, 10}, {"b", 8, 20}}, 20, 2); })
                .find("unit b [8, 20) overlaps the units before it"),
            std::string::npos);
  EXPECT_NE(error_of([] { Sharding({{"a", 0, 10}}, 10, 0); }).find("0 ranks"), std::string::npos);
}

// Runs train_zero with `options` on `ranks` ranks and returns the error.
std::string run_error(const ZeroOptions& options, int ranks, std::int64_t batch = 12) {
  train::RunSpec spec = tiny("mlp-tiny", 1);
  spec.batch = batch;
  return error_of([&] {
    train::run_ranks<double>(spec, on(ranks),
                             [&](train::RankRun<double>& run) { train_zero(run, options); });
  });
}

DTW_TEST_STEPS(ZeroOptionsTest);
TEST(ZeroOptionsTest, BadOptionsAreClearErrorsNamingTheRank) {
  EXPECT_NE(run_error({.stage = 4}, 2).find("ZeRO: stage 4 is not 1, 2 or 3"), std::string::npos);
  EXPECT_NE(run_error({.stage = 0}, 2).find("stage 0 is not 1, 2 or 3"), std::string::npos);
  EXPECT_NE(run_error({.stage = 3, .prefetch = -1}, 3).find("prefetch depth -1 must not be negative"),
            std::string::npos);
  EXPECT_NE(run_error({.stage = 2, .prefetch = 1}, 2).find("only stage 3"), std::string::npos);
  EXPECT_NE(run_error({.stage = 1, .micro_batches = 0}, 2).find("micro_batches 0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(run_error({.stage = 2, .micro_batches = 4}, 4)
                .find("a global batch of 12 rows cannot be split over 4 ranks x 4 micro-batches"),
            std::string::npos);
  EXPECT_NE(run_error({.stage = 1, .save_dir = "x", .save_after = 7}, 2)
                .find("save_after 7 is outside [0, 1] steps"),
            std::string::npos);
  // Every rank raises one (no rank waits for another); which is reported
  // first depends on the threads' timing, but it names its rank.
  const std::string nine = run_error({.stage = 9}, 3);
  EXPECT_TRUE(std::regex_search(nine, std::regex("rank [0-2]: ZeRO: stage 9"))) << nine;
}

TEST(ZeroOptionsTest, BeforeAnyRankRunsTheSameChecksNameNoRank) {
  // What the strategies' registrations check before a run (rank -1).
  train::RunSpec spec = tiny("mlp-tiny", 1);
  spec.batch = 8;
  const std::string what =
      error_of([&] { ZeroOptions{.stage = 3, .micro_batches = 3}.validate(-1, 4, spec); });
  EXPECT_EQ(what.rfind("ZeRO: a global batch of 8 rows cannot be split over 4 ranks x 3", 0), 0u)
      << what;
  EXPECT_EQ(error_of([&] { ZeroOptions{.stage = 3, .micro_batches = 2}.validate(-1, 4, spec); }),
            "(no error)");
}

TEST(ZeroOptionsTest, KnobsReachTheOptions) {
  const ZeroOptions o = ZeroOptions::from_knobs(
      train::Knobs::parse({"micro_batches=3", "prefetch=2", "save=d", "save_after=5", "resume=e"}), 3);
  EXPECT_EQ(o.stage, 3);
  EXPECT_EQ(o.micro_batches, 3);
  EXPECT_EQ(o.prefetch, 2);
  EXPECT_EQ(o.save_dir, "d");
  EXPECT_EQ(o.save_after, 5);
  EXPECT_EQ(o.resume_dir, "e");
  EXPECT_EQ(ZeroOptions::from_knobs(train::Knobs(), 3, 1).prefetch, 1);
  EXPECT_NE(error_of([] { ZeroOptions::from_knobs(train::Knobs::parse({"prefetch=two"}), 3); })
                .find("prefetch=two is not an integer"),
            std::string::npos);
}

}  // namespace
}  // namespace dtw::ch04
