// Step 02.3, the reducer by itself: it starts the buckets' allreduces
// strictly in bucket order, even on ranks that see them complete in
// different orders, and it refuses a range reported twice in a pass, naming
// the rank and the bucket.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::tiny;

// Rank r's gradient element i: distinct on every rank, so a sum that pairs
// the wrong ranges shows.
double grad_of(int rank, std::size_t i) { return 1000.0 * (rank + 1) + static_cast<double>(i); }

DTW_TEST_STEPS(BucketReducerTest, "02.3");
TEST(BucketReducerTest, StartsBucketsInBucketOrderWhicheverOrderTheyCompleteIn) {
  // Rank 0 finishes the buckets last one first, rank 1 first one first (as
  // two ranks can when a backward's order depends on data). A reducer that
  // started each bucket the moment it completed would start rank 0's last
  // bucket against rank 1's first one.
  const train::RunSpec spec = tiny("mlp-tiny");
  const int p = 2;
  DTW_TRACE("the buckets of mlp-tiny, 1 KiB cap, finished in opposite orders on 2 ranks");
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    const std::span<double> g = replica.grads();
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = grad_of(comm.rank(), i);
    std::vector<train::Range> buckets = make_buckets(replica.layout(), 1024, sizeof(double));
    ASSERT_GE(buckets.size(), 3u) << "the test needs several buckets";
    BucketReducer<double> reducer(comm, replica, buckets);
    const model::GradReady hook = reducer.hook();
    if (comm.rank() == 0) {
      for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) hook(b->begin, b->end);
    } else {
      for (const train::Range& b : buckets) hook(b.begin, b.end);
    }
    reducer.finish();
    std::vector<double> want(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) want[i] = grad_of(0, i) + grad_of(1, i);
    const std::vector<double> got(g.begin(), g.end());
    DTW_EXPECT_SAME(comm.rank(), want, got);
  });
}

TEST(BucketReducerTest, ARangeReportedTwiceInOnePassIsAClearError) {
  // Counting a range twice would make a bucket look complete while some of
  // its gradients are still being computed: its allreduce would send them
  // unfinished.
  const train::RunSpec spec = tiny("mlp-tiny");
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
