// Step 03.5: stragglers. A worker told it is f times slower really sleeps
// (f − 1) times its compute time (measured around the sleep, not taken from
// the request), the others do not sleep, the synchronous result does not
// change, and under order=scripted nobody sleeps (the order is decided in
// virtual time already).
#include <gtest/gtest.h>

#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::knobs;
using testing::run_ps;
using testing::tiny;

TEST(PsStragglerTest, AStragglerSleepsItsFactorMinusOneTimesItsComputeTime) {
  const auto r = run_ps<double>(testing::sync_fn<double>(), tiny("gpt-tiny", 3, 6), 3,
                                knobs({"straggler=1:3"}));
  EXPECT_TRUE(r.out.matches) << "a slow worker changes the time, never the result: "
                             << r.out.mismatch;
  ASSERT_EQ(r.compute.size(), 3u);
  EXPECT_EQ(r.straggle[0], 0.0) << "the server does not straggle";
  EXPECT_EQ(r.straggle[1], 0.0) << "worker 0 is not a straggler";
  EXPECT_GT(r.compute[2], 0.0);
  // sleep_for never returns early, so the measured sleep is at least 2× the compute.
  EXPECT_GE(r.straggle[2], 2 * r.compute[2] * 0.999)
      << "worker 1 computed " << r.compute[2] << " s and slept " << r.straggle[2] << " s";
}

TEST(PsStragglerTest, EveryStrategyStragglesTheSameWay) {
  for (const auto& fn : {testing::async_fn<double>(), testing::ssp_fn<double>()}) {
    const auto r = run_ps<double>(fn, tiny("mlp-tiny", 4, 6), 4,
                                  knobs({"straggler=0:2.5,2:1.5"}), false);
    EXPECT_GE(r.straggle[1], 1.5 * r.compute[1] * 0.999);
    EXPECT_EQ(r.straggle[2], 0.0);
    EXPECT_GE(r.straggle[3], 0.5 * r.compute[3] * 0.999);
  }
}

TEST(PsStragglerTest, ScriptedOrderDoesNotSleep) {
  const auto r = run_ps<double>(testing::async_fn<double>(), tiny("mlp-tiny", 4, 6), 3,
                                knobs({"straggler=1:4", "order=scripted"}), false);
  EXPECT_EQ(r.straggle[2], 0.0);
}

}  // namespace
}  // namespace dtw::ch03
