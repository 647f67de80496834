// Step 03.1: the synchronous parameter server with one server reproduces the
// reference in double (GPT and MLP, an even and an uneven batch), logs every
// push in worker order at its own step, and is never stale. (A worker that
// dies mid-run: pitfalls_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "dtw/errors.h"
#include "ps_test.h"

namespace dtw::ch03 {
namespace {

using testing::knobs;
using testing::run_ps;
using testing::sync_fn;
using testing::tiny;

DTW_TEST_STEPS(PsSyncTest, "03.1");
TEST(PsSyncTest, OneServerMatchesTheReference) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int workers : {1, 3}) {
      DTW_TRACE("ps-sync, " << model << ", 1 server, " << workers << " worker(s)");
      const auto r = run_ps<double>(sync_fn<double>(), tiny(model), 1 + workers, knobs({}));
      EXPECT_TRUE(r.out.matches) << model << ", 1 server, " << workers << " workers: "
                                 << r.out.mismatch;
      EXPECT_EQ(r.out.losses.size(), 3u) << model;
      // Only the server holds parameters to compare: the whole model.
      EXPECT_EQ(r.out.compared, train::reference_run<double>(tiny(model))->layout.size());
    }
  }
}

TEST(PsSyncTest, TwoServersOnRangesGivenByHandMatchTheReference) {
  // The worker's loops over servers with S = 2, before step 03.4: the ranges
  // are given by hand and clipping is off, so no code of 03.4 runs (no split,
  // no norm exchanged between the servers).
  train::RunSpec spec = tiny("gpt-tiny");
  spec.clip_norm = 0;
  const std::int64_t psi = train::reference_run<double>(spec)->layout.size();
  const std::string cut = std::to_string(psi / 3);
  DTW_TRACE("ps-sync, gpt-tiny, 2 servers on ranges given by hand [0, " << cut << ") and [" << cut
                                                                       << ", " << psi
                                                                       << "), 3 workers, no clipping");
  const auto r = run_ps<double>(
      sync_fn<double>(), spec, 5,
      knobs({"servers=2", "ranges=0-" + cut + "," + cut + "-" + std::to_string(psi)}));
  EXPECT_TRUE(r.out.matches) << "2 servers, 3 workers: " << r.out.mismatch;
  EXPECT_EQ(r.out.compared, psi) << "the two servers' shards together are the model";
}

TEST(PsSyncTest, UnevenShardsOfTheBatchAreWeightedByTheirRows) {
  DTW_TRACE("ps-sync, gpt-tiny, 1 server, 3 workers, 7 rows (3, 2, 2)");
  // 7 rows over 3 workers: 3, 2, 2.
  const auto r = run_ps<double>(sync_fn<double>(), tiny("gpt-tiny", 2, 7), 4, knobs({}));
  EXPECT_TRUE(r.out.matches) << r.out.mismatch;
}

TEST(PsSyncTest, EveryPushIsTakenInWorkerOrderAtItsOwnStep) {
  DTW_TRACE("ps-sync, mlp-tiny, 1 server, 3 workers: the server's log");
  const auto r = run_ps<double>(sync_fn<double>(), tiny("mlp-tiny", 3, 6), 4, knobs({}));
  ASSERT_EQ(r.updates.size(), 4u);
  const std::vector<PsUpdate>& log = r.updates[0];  // the server's
  ASSERT_EQ(log.size(), 9u);
  for (std::size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].worker, static_cast<int>(i % 3)) << "push " << i;
    EXPECT_EQ(log[i].clock, static_cast<std::int64_t>(i / 3)) << "push " << i;
    EXPECT_EQ(log[i].applied - log[i].pulled, 0) << "push " << i << ": synchronous is never stale";
  }
  for (std::size_t rank = 1; rank < 4; ++rank) EXPECT_TRUE(r.updates[rank].empty());
}

}  // namespace
}  // namespace dtw::ch03
