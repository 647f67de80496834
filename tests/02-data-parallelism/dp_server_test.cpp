// Step 02.1: data parallelism with a central model server. It matches the
// reference on 1-4 ranks for both models; its traffic is the star the cost
// model predicts (every worker's gradient in, the parameters out, through
// rank 0's link); and only the server holds optimizer state.
#include <gtest/gtest.h>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::model_size;
using testing::tiny;

void server(train::RankRun<double>& run) {
  dp_server(run);
}

DTW_TEST_STEPS(DpServerTest, "02.1");
TEST(DpServerTest, MatchesTheReferenceOnOneToFourRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int p = 1; p <= 4; ++p) expect_matches(tiny(model), p, server);
}

TEST(DpServerTest, TheServersLinkCarriesEveryWorkersGradientAndParameters) {
  const train::RunSpec spec = tiny("mlp-tiny", 3);
  const int p = 4;
  DTW_TRACE("dp-server's traffic on 4 ranks: gradients and losses in, parameters out");
  const train::RunOutcome out = expect_matches(spec, p, server);
  const std::int64_t psi = model_size(spec) * static_cast<std::int64_t>(sizeof(double));
  for (int w = 1; w < p; ++w) {
    // Per step: θ from the server; the gradient and one double of loss to it.
    EXPECT_EQ(out.report.traffic.bytes(0, w), spec.steps * psi) << "server -> worker " << w;
    EXPECT_EQ(out.report.traffic.bytes(w, 0), spec.steps * (psi + 8))
        << "worker " << w << " -> server";
    for (int v = 1; v < p; ++v)
      EXPECT_EQ(out.report.traffic.bytes(w, v), 0)
          << "workers never talk to each other: " << w << " -> " << v;
  }
}

TEST(DpServerTest, OnlyTheServerHoldsOptimizerState) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const int p = 3;
  const train::RunOutcome out = expect_matches(spec, p, server);
  const std::int64_t psi = model_size(spec) * static_cast<std::int64_t>(sizeof(double));
  ASSERT_EQ(out.report.memory.size(), static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
    EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), psi) << "rank " << r;
    EXPECT_EQ(m.peak_of(MemoryCategory::kGradients), psi) << "rank " << r;
    // AdamW's two moments on the server, nothing on a worker.
    EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), r == 0 ? 2 * psi : 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace dtw::ch02
