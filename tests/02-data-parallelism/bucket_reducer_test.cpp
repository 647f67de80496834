// Step 02.3, the reducer by itself: it starts the buckets' allreduces
// strictly in bucket order, even on ranks that see them complete in
// different orders (counted from the traffic: nothing is sent before bucket 0
// is complete); every report from backward moves the rings in flight (counted
// from the traffic and the gradients before finish(), with the ranks in
// lockstep, not from timings); a pass can follow a pass; and it refuses a
// range reported twice and a bucket never completed, naming the rank and the
// bucket.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dp_test.h"
#include "dtw/results.h"

namespace dtw::ch02 {
namespace {

using testing::tiny;

// Rank r's gradient element i: distinct on every rank, so a sum that pairs
// the wrong ranges shows.
double grad_of(int rank, std::size_t i) { return 1000.0 * (rank + 1) + static_cast<double>(i); }

// Messages this rank has sent so far, to every peer.
std::int64_t messages_sent(const Comm& comm) {
  std::int64_t n = 0;
  for (const PeerTraffic& e : comm.traffic().peers()) n += e.messages_sent;
  return n;
}

// Every rank's gradients set to grad_of, and the sum over `p` ranks expected.
std::vector<double> fill_and_sum(Comm& comm, std::span<double> g, int p) {
  std::vector<double> want(g.size(), 0.0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] = grad_of(comm.rank(), i);
    for (int q = 0; q < p; ++q) want[i] += grad_of(q, i);
  }
  return want;
}

DTW_TEST_STEPS(BucketReducerTest, "02.3");
TEST(BucketReducerTest, StartsBucketsInBucketOrderWhicheverOrderTheyCompleteIn) {
  // Rank 0 finishes the buckets last one first, rank 1 first one first (as
  // two ranks can when a backward's order depends on data). The buckets are
  // of one size, so a reducer that started each bucket the moment it
  // completed would run rank 0's last bucket and rank 1's first one as one
  // allreduce without any error, and leave each holding the other's sum.
  const train::RunSpec spec = tiny("mlp-tiny");
  const int p = 2;
  DTW_TRACE("4 buckets of one size of mlp-tiny's gradients, finished in opposite orders on 2 ranks");
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    const std::span<double> g = replica.grads();
    const std::vector<double> want = fill_and_sum(comm, g, p);
    // Ready order: bucket 0 is the top quarter of the buffer, bucket 3 the lowest.
    const std::int64_t n = static_cast<std::int64_t>(g.size()), quarter = n / 4;
    std::vector<train::Range> buckets;
    for (std::int64_t i = 0; i < 4; ++i) buckets.push_back({n - (i + 1) * quarter, n - i * quarter});
    BucketReducer<double> reducer(comm, replica, buckets);
    const model::GradReady hook = reducer.hook();
    if (comm.rank() == 0) {
      for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) hook(b->begin, b->end);
    } else {
      for (const train::Range& b : buckets) hook(b.begin, b.end);
    }
    reducer.finish();
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const auto at = [&](const std::vector<double>& v, std::int64_t i) {
        return v[static_cast<std::size_t>(i)];
      };
      const std::vector<double> got(g.begin(), g.end());
      bool summed = true;
      for (std::int64_t i = buckets[b].begin; i < buckets[b].end; ++i)
        summed = summed && at(got, i) == at(want, i);
      EXPECT_TRUE(summed)
          << "rank " << comm.rank() << ": bucket " << b << " [" << buckets[b].begin << ", "
          << buckets[b].end << ") does not hold the sum of every rank's bucket " << b
          << ". Buckets must start strictly in bucket order on every rank, even when a later "
          << "one completes first: started as they complete, rank 0's bucket 3 runs as one "
          << "allreduce with rank 1's bucket 0 (and an op other than the sum is wrong too)";
    }
  });
}

TEST(BucketReducerTest, EveryReportFromBackwardMovesTheRingsInFlight) {
  // The ranks report gpt-tiny's buckets one by one, in bucket order and in
  // lockstep: after each report they meet on the runtime's own channel,
  // which moves no ring. A ring advances only inside a call into it, so a
  // reducer that polls its rings at every report has finished bucket 0's
  // allreduce (2(p-1) rounds) long before the last report; one that never
  // does leaves every ring in its first rounds until finish().
  const train::RunSpec spec = tiny("gpt-tiny");
  const int p = 3;
  DTW_TRACE("gpt-tiny's buckets at a 1 KiB cap reported one by one on 3 ranks in lockstep, "
            "the rings checked before finish()");
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    const std::span<double> g = replica.grads();
    const std::vector<double> want = fill_and_sum(comm, g, p);
    const std::vector<train::Range> buckets =
        make_buckets(replica.layout(), 1024, sizeof(double));
    const std::int64_t n = static_cast<std::int64_t>(buckets.size()), rounds = 2 * (p - 1);
    ASSERT_GE(n, 4 * rounds) << "the test needs many buckets";
    BucketReducer<double> reducer(comm, replica, buckets);
    const model::GradReady hook = reducer.hook();
    for (const train::Range& b : buckets) {
      hook(b.begin, b.end);
      (void)allgather_results(comm, 0);  // lockstep, outside the traffic
    }
    // Each report posts the first round of its bucket and, polling, one
    // more round of every ring in flight: all but the last `rounds` buckets
    // have finished, 2(p-1) messages each.
    const std::int64_t sent = messages_sent(comm);
    EXPECT_GE(sent, rounds * (n - rounds))
        << "rank " << comm.rank() << " had sent " << sent << " messages for " << n
        << " buckets reported one by one before finish(); a ring of " << p << " ranks sends "
        << rounds << " per bucket, and polling at every report would have finished all but "
        << "the last " << rounds << ". ready() must advance the allreduces in flight (test() "
        << "on one of them) every time backward reports a range: nothing else moves a ring "
        << "before finish(), so nothing would overlap with backward";
    const train::Range first = buckets.front();
    const std::vector<double> got(g.begin() + first.begin, g.begin() + first.end);
    const std::vector<double> sum(want.begin() + first.begin, want.begin() + first.end);
    DTW_EXPECT_SAME(comm.rank(), sum, got);
    reducer.finish();
  });
}

TEST(BucketReducerTest, APassAfterAPassSumsAgain) {
  // finish() leaves the reducer as it was built, so every step's backward
  // can use it again (ddp_bucketed does, every step).
  const train::RunSpec spec = tiny("mlp-tiny");
  const int p = 2;
  DTW_TRACE("the buckets of mlp-tiny, 1 KiB cap, three passes through one reducer on 2 ranks");
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    const std::span<double> g = replica.grads();
    const std::vector<train::Range> buckets =
        make_buckets(replica.layout(), 1024, sizeof(double));
    BucketReducer<double> reducer(comm, replica, buckets);
    for (int pass = 0; pass < 3; ++pass) {
      const std::vector<double> want = fill_and_sum(comm, g, p);
      for (const train::Range& b : buckets) reducer.ready(b.begin, b.end);
      reducer.finish();
      const std::vector<double> got(g.begin(), g.end());
      DTW_EXPECT_SAME(comm.rank(), want, got);
    }
  });
}

TEST(BucketReducerTest, ABucketNeverCompletedIsAClearErrorNotAHang) {
  // Backward never reported the first tensor: the last bucket was never
  // started, so waiting for it would wait for ever.
  const train::RunSpec spec = tiny("mlp-tiny");
  DTW_TRACE("the buckets of mlp-tiny, 1 KiB cap, the first tensor never reported, on 2 ranks");
  testing::expect_error(
      [&] {
        dtw::testing::launch_bounded(2, [&](Comm& comm) {
          train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
          const std::vector<train::Range> buckets =
              make_buckets(replica.layout(), 1024, sizeof(double));
          BucketReducer<double> reducer(comm, replica, buckets);
          const std::int64_t first = replica.layout().views().front().size;
          reducer.ready(first, replica.layout().size());
          reducer.finish();
        });
      },
      {"bucket " + std::to_string(make_buckets(model::param_layout(spec.config()), 1024, 8).size() - 1),
       "still misses"});
}

TEST(BucketReducerTest, ARangeReportedTwiceInOnePassIsAClearError) {
  // Counting a range twice would make a bucket look complete while some of
  // its gradients are still being computed: its allreduce would send them
  // unfinished.
  const train::RunSpec spec = tiny("mlp-tiny");
  DTW_TRACE("one bucket of mlp-tiny, three quarters of it reported twice, on 1 rank");
  testing::expect_error(
      [&] {
        dtw::testing::launch_bounded(1, [&](Comm& comm) {
          train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
          const std::vector<train::Range> buckets =
              make_buckets(replica.layout(), 1 << 30, sizeof(double));
          BucketReducer<double> reducer(comm, replica, buckets);
          // Three quarters of the one bucket, twice: more than all of it.
          const train::Range all = buckets.front();
          const std::int64_t quarter = all.begin + all.size() / 4;
          reducer.ready(quarter, all.end);
          reducer.ready(quarter, all.end);
        });
      },
      {"rank 0", "bucket 0", "twice"});
}

}  // namespace
}  // namespace dtw::ch02
