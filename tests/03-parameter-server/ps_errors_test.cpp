// Step 03.1 (bad input): every misconfiguration is an InvalidArgument naming
// the values, raised on every rank before any message moves, so nothing hangs.
#include <gtest/gtest.h>

#include <string>

#include "dtw/errors.h"
#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::expect_error;
using testing::knobs;
using testing::tiny;

void expect_bad(int ranks, std::initializer_list<std::string> kv, const std::string& text) {
  for (const auto& fn : {testing::sync_fn<double>(), testing::async_fn<double>(),
                         testing::ssp_fn<double>()})
    expect_error<InvalidArgument, double>(fn, tiny("mlp-tiny", 2, 6), ranks, knobs(kv), text);
}

DTW_TEST_STEPS(PsErrorsTest);
TEST(PsErrorsTest, ServersAndWorkersMustBeAtLeastOneAndFillTheWorld) {
  expect_bad(3, {"servers=0"}, "servers=0: there must be at least one server");
  expect_bad(3, {"servers=3"}, "a world of 3 ranks with 3 servers leaves no worker");
  expect_bad(3, {"workers=0"}, "workers=0: there must be at least one worker");
  expect_bad(3, {"servers=1", "workers=3"}, "1 servers + 3 workers = 4 ranks, but the world has 3");
  expect_bad(1, {}, "a world of 1 ranks with 1 servers leaves no worker");
}

TEST(PsErrorsTest, ANegativeStalenessIsRefused) {
  expect_bad(3, {"staleness=-1"}, "staleness=-1 is negative");
  expect_bad(3, {"staleness=soon"}, "staleness=soon: 'soon' is not a whole number");
}

TEST(PsErrorsTest, ServerRangesMustOwnEveryParameterOnce) {
  const std::int64_t psi = train::reference_run<double>(tiny("mlp-tiny", 2, 6))->layout.size();
  const std::string all = std::to_string(psi);
  // A gap between the two shards.
  expect_bad(4, {"servers=2", "ranges=0-100,200-" + all},
             "parameters [100, 200) are owned by no server (server 1 starts at 200)");
  // The end of the model left out.
  expect_bad(4, {"servers=2", "ranges=0-100,100-" + std::to_string(psi - 5)},
             "parameters [" + std::to_string(psi - 5) + ", " + all + ") are owned by no server");
  // Overlapping shards, and one range for two servers.
  expect_bad(4, {"servers=2", "ranges=0-100,50-" + all}, "overlaps");
  expect_bad(4, {"servers=2", "ranges=0-" + all}, "1 ranges for 2 servers");
  expect_bad(4, {"servers=2", "ranges=0-100;100-" + all}, "is not a whole number");
  expect_bad(4, {"servers=2", "ranges=0:100,100:" + all}, "must read BEGIN-END");
}

TEST(PsErrorsTest, MalformedStragglersAndOrdersAreNamed) {
  expect_bad(3, {"straggler=1"}, "straggler=1: '1' must read WORKER:VALUE");
  expect_bad(3, {"straggler=1:0.5"}, "worker 1's factor '0.5' must be a number in [1, 100]");
  expect_bad(3, {"order=random"}, "order=random: use arrival");
  expect_bad(3, {"lr_scale=-2"}, "lr_scale=-2 must be a positive number");
  expect_bad(3, {"jitter=3"}, "jitter=3: must read FACTOR:SHARE");
  expect_bad(3, {"jitter=0.5:0.1"}, "jitter=0.5:0.1: must read FACTOR:SHARE, a factor in [1, 100]");
  expect_bad(3, {"jitter=2:1.5"}, "a share in [0, 1]");
}

TEST(PsErrorsTest, OptionsParseWithoutAWorld) {
  const PsOptions o = ps_options(knobs({"servers=2", "straggler=1:3,3:2.5", "staleness=inf",
                                        "order=scripted", "crash=2:7"}));
  EXPECT_EQ(o.servers, 2);
  EXPECT_EQ(o.slowdown_of(0), 1.0);
  EXPECT_EQ(o.slowdown_of(1), 3.0);
  EXPECT_EQ(o.slowdown_of(3), 2.5);
  EXPECT_EQ(o.slowdown_of(9), 1.0);
  EXPECT_EQ(o.staleness, PsOptions::kUnbounded);
  EXPECT_TRUE(o.scripted);
  EXPECT_EQ(o.crash_worker, 2);
  EXPECT_EQ(o.crash_step, 7);
}

}  // namespace
}  // namespace dtw::ch03
