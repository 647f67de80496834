// Step 07.1, attention on sequence shards through an all-gather: forward and
// backward (out, lse, dq, dk, dv) equal single-device attention in double on
// 1-8 ranks, causal or not; per layer each rank sends the all-gathers of K
// and V (forward and backward) and the reduce-scatter of dK, dV.
#include <gtest/gtest.h>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::Kind;
using testing::Problem;

DTW_TEST_STEPS(GatheredTest, "07.1");
TEST(GatheredTest, ForwardAndBackwardEqualSingleDeviceAttention) {
  struct Case {
    int p;
    std::int64_t heads, batch;
    bool causal;
  };
  for (const Case c : {Case{1, 4, 1, true}, Case{2, 4, 3, true}, Case{3, 8, 1, false},
                       Case{4, 4, 1, true}, Case{8, 8, 3, true}}) {
    const Problem pr{.batch = c.batch, .heads = c.heads, .seq = c.p == 3 ? 24 : 32,
                     .head_dim = 4, .causal = c.causal};
    DTW_TRACE("all-gather attention, " << pr.describe(c.p));
    testing::run_core<double>(Kind::kGathered, pr, c.p, 1e-12);
  }
}

TEST(GatheredTest, ALayerGathersKAndVTwiceAndReduceScattersTheirGradients) {
  for (int p : {2, 3, 4}) {
    const Problem pr{.batch = 2, .heads = 4, .seq = 24, .head_dim = 2};
    DTW_TRACE("all-gather traffic, " << pr.describe(p));
    const Report report = testing::run_core<double>(Kind::kGathered, pr, p, 1e-12);
    if (!testing::no_rank_failed(report)) return;
    // Ring all-gather of 2n per rank: (p−1)·2n sent, twice; ring reduce-scatter of
    // p blocks of 2n: (p−1)·2n. In all 6(p−1)·n elements.
    const std::int64_t n = pr.batch * pr.heads * (pr.seq / p) * pr.head_dim;
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(testing::bytes_sent(report, r), 6 * (p - 1) * n * 8)
          << "rank " << r << " sent these bytes; a layer sends 6(p−1)·n elements (two ring "
          << "all-gathers of [K; V] and one ring reduce-scatter of [dK; dV], 2(p−1)·n each)";
  }
}

}  // namespace
}  // namespace dtw::ch07
