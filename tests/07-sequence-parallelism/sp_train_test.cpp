// Steps 07.1-07.4 in training: gpt-tiny trained sequence-parallel with each
// core matches the single-device reference in double (parameters and
// losses, every step), on worlds of 1 to 8 ranks; a run that cannot cut is
// refused before any message, naming the strategy, the values and the rank.
#include <gtest/gtest.h>

#include <functional>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::expect_matches;
using testing::tiny;

DTW_TEST_STEPS(SpAllgatherTest, "07.1");
TEST(SpAllgatherTest, MatchesTheReference) {
  expect_matches(tiny(32), 1, sp_allgather<double>);
  expect_matches(tiny(32), 2, sp_allgather<double>);
  expect_matches(tiny(24), 3, sp_allgather<double>);
  expect_matches(tiny(32, 2, 1), 4, sp_allgather<double>);  // one sequence
}

DTW_TEST_STEPS(SpUlyssesTest, "07.1", "07.2");
TEST(SpUlyssesTest, MatchesTheReference) {
  expect_matches(tiny(32), 1, sp_ulysses<double>);
  expect_matches(tiny(32), 2, sp_ulysses<double>);
  expect_matches(tiny(32), 4, sp_ulysses<double>);
  expect_matches(tiny(16, 2, 1), 4, sp_ulysses<double>);  // one sequence of 16 tokens
}

DTW_TEST_STEPS(SpRingTest, "07.1", "07.3");
TEST(SpRingTest, MatchesTheReference) {
  expect_matches(tiny(32), 1, sp_ring<double>);
  expect_matches(tiny(32), 2, sp_ring<double>);
  expect_matches(tiny(24), 3, sp_ring<double>);
  expect_matches(tiny(32, 2, 1), 4, sp_ring<double>);
}

DTW_TEST_STEPS(SpRingZigZagTest, "07.1", "07.3", "07.4");
TEST(SpRingZigZagTest, MatchesTheReference) {
  expect_matches(tiny(32), 1, sp_ring_zigzag<double>);
  expect_matches(tiny(32), 2, sp_ring_zigzag<double>);
  expect_matches(tiny(24), 3, sp_ring_zigzag<double>);
  expect_matches(tiny(32), 4, sp_ring_zigzag<double>);
}

TEST(SpRingZigZagTest, MatchesTheReferenceOnEightRanks) {
  expect_matches(tiny(32, 2), 8, sp_ring_zigzag<double>);
}

// Bytes per step of a whole GPT on 2 ranks, from the traffic record: every
// layer's core forward and backward, plus the ring allreduce of the Ψ
// gradients and the loss (on 2 ranks each rank sends exactly Ψ + 1 values).
std::int64_t step_bytes(const train::RunSpec& spec, std::int64_t core_per_layer) {
  const std::int64_t psi = model::param_layout(spec.config()).size();
  return (spec.config().layers * core_per_layer + psi + 1) * 8;
}

void expect_step_bytes(const std::function<void(train::RankRun<double>&)>& strategy,
                       std::int64_t core_per_layer, const char* method) {
  const train::RunSpec spec = tiny(32, 2);
  DTW_TRACE("bytes per step of " << method << ", gpt-tiny on 2 ranks");
  const train::RunOutcome out = expect_matches(spec, 2, strategy);
  if (!testing::no_rank_failed(out.report)) return;
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(testing::bytes_sent(out.report, r), spec.steps * step_bytes(spec, core_per_layer))
        << method << ", rank " << r << ": the bytes of a step are every layer's core forward "
        << "and backward (the method's formula) plus the ring allreduce of the Ψ gradients and "
        << "the loss";
}

// n = B·(T/p)·C values of one of q, k, v on a rank.
std::int64_t tensor_values(const train::RunSpec& spec, int p) {
  return spec.batch * (spec.sequence() / p) * spec.config().dim;
}

TEST(SpAllgatherTest, SendsTheFormulasBytesPerStep) {
  const std::int64_t n = tensor_values(tiny(32, 2), 2);
  expect_step_bytes(sp_allgather<double>, 6 * n, "sp-allgather");  // 6(p−1)·n
}

TEST(SpUlyssesTest, SendsTheFormulasBytesPerStep) {
  const std::int64_t n = tensor_values(tiny(32, 2), 2);
  expect_step_bytes(sp_ulysses<double>, 8 * n / 2, "sp-ulysses");  // 8(p−1)/p·n
}

TEST(SpRingTest, SendsTheFormulasBytesPerStep) {
  const std::int64_t n = tensor_values(tiny(32, 2), 2);
  expect_step_bytes(sp_ring<double>, 2 * n + 2 * n + 4 * n, "sp-ring");  // 2(p−1)n + 2(p−1)n + 2pn
}

DTW_TEST_STEPS(SpArgumentsTest);  // refused before any lab code runs
TEST(SpArgumentsTest, ASequenceThatDoesNotCutIsRefusedOnEveryRank) {
  testing::expect_error(
      [] { train::run_ranks<double>(tiny(30), testing::on(4), sp_ring<double>); },
      {"sp-ring on rank", "p = 4", "30 tokens", "4 contiguous parts"});
  testing::expect_error([] { check_sp_run(tiny(20), 4, Method::kRingZigZag, -1); },
                        {"sp-ring-zigzag", "20 tokens", "8 zig-zag parts"});
}

TEST(SpArgumentsTest, AModelWithoutSequencesIsRefused) {
  train::RunSpec mlp = train::standard_run("mlp-tiny");
  testing::expect_error([&] { check_sp_run(mlp, 2, Method::kRing, -1); },
                        {"sp-ring", "mlp-tiny has none"});
}

}  // namespace
}  // namespace dtw::ch07
