// Step 02.2: data parallelism with a ring allreduce. It matches the reference
// on 1-4 ranks for both models, and its traffic is the ring's: each chunk
// travels p−1 times in each half, 2(p−1)·Ψ elements per step in all, spread
// evenly over the p links of the ring.
#include <gtest/gtest.h>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::model_size;
using testing::tiny;

void allreduce(train::RankRun<double>& run) {
  dp_allreduce(run);
}

DTW_TEST_STEPS(DpAllreduceTest, "02.2");
TEST(DpAllreduceTest, MatchesTheReferenceOnOneToFourRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int p = 1; p <= 4; ++p) expect_matches(tiny(model), p, allreduce);
}

TEST(DpAllreduceTest, EveryLinkOfTheRingCarriesItsShare) {
  const train::RunSpec spec = tiny("mlp-tiny", 3);
  const int p = 3;
  DTW_TRACE("dp-allreduce's traffic on 3 ranks: rank 0's broadcast at the start, then a ring "
            "allreduce of the gradients and one of the loss per step");
  const train::RunOutcome out = expect_matches(spec, p, allreduce);
  const std::int64_t e = sizeof(double), psi = model_size(spec);
  // The broadcast at the start brings Ψ to each of the p−1 other ranks; then
  // every step allreduces Ψ gradients and one loss, 2(p−1)·n elements each.
  const std::int64_t expected = (p - 1) * psi * e + spec.steps * 2 * (p - 1) * (psi + 1) * e;
  EXPECT_EQ(out.report.total_bytes(), expected)
      << "bytes of the whole run: (p-1)·Ψ for the broadcast, 2(p-1)·(Ψ+1) per step";
  for (int r = 0; r < p; ++r) {
    const std::int64_t ring = out.report.traffic.bytes(r, (r + 1) % p);
    // Each link carries 2(p−1)/p of the gradients per step (chunk rounding aside).
    EXPECT_GE(ring, spec.steps * 2 * (p - 1) * (psi / p) * e)
        << "link " << r << " -> " << (r + 1) % p;
  }
}

DTW_TEST_STEPS(DpAllreduceArgumentsTest);
TEST(DpAllreduceArgumentsTest, ABatchSmallerThanTheWorldIsAClearErrorOnEveryRank) {
  train::RunSpec spec = tiny("gpt-tiny");
  spec.batch = 2;
  testing::expect_error([&] { train::run_ranks<double>(spec, testing::on(3), allreduce); },
                        {"a global batch of 2 cannot be split over 3"});
}

TEST(DpAllreduceArgumentsTest, ANegativeCheckIntervalIsAClearError) {
  testing::expect_error(
      [&] {
        train::run_ranks<double>(tiny("mlp-tiny", 1),
                                 testing::on(2, train::Knobs().set("check_every", "-1")),
                                 allreduce);
      },
      {"check_every=-1"});
}

}  // namespace
}  // namespace dtw::ch02
