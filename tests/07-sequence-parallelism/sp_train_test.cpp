// Steps 07.1-07.4 in training: the summed gradients of one step equal a
// single device's before the optimizer (tensor by tensor, with the factor
// when they differ); gpt-tiny trained sequence-parallel with each
// core matches the single-device reference in double (parameters and
// losses, every step), on worlds of 1 to 8 ranks; a run that cannot cut is
// refused before any message, naming the strategy, the values and the rank.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::expect_matches;
using testing::tiny;

// The seams of a rank whose only collective is the attention core.
class CoreSeams final : public model::Seams<double> {
 public:
  explicit CoreSeams(model::AttentionCore<double>& core) : core_(core) {}
  model::AttentionCore<double>& attention() override { return core_; }

 private:
  model::AttentionCore<double>& core_;
};

// "" when got equals the reference within rounding; otherwise what the
// difference is: the factor between the two when there is one, and its cause.
std::string gradient_difference(const std::string& what, int p, std::span<const double> want,
                                 std::span<const double> got) {
  double dot = 0, norm = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    dot += got[i] * want[i];
    norm += want[i] * want[i];
    scale = std::max(scale, std::abs(want[i]));
  }
  std::size_t bad = want.size();
  for (std::size_t i = 0; i < want.size() && bad == want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-10 * std::max(scale, 1e-12))) bad = i;
  if (bad == want.size()) return {};
  const double factor = norm > 0 ? dot / norm : 0;
  const auto near = [&](double f) { return std::abs(factor - f) <= 1e-6 * f; };
  std::ostringstream o;
  o << what << " is " << factor << "× the reference's (one device, the whole batch)";
  if (near(p)) {
    o << ": every rank counts its tokens' loss as the whole batch's. Weigh each rank's loss "
         "and gradients by its share of the batch's tokens, then sum";
  } else if (near(1.0 / p)) {
    o << ": divided by p on top of the share weights. The weights (each rank's share of "
         "the tokens) already make the sum over the ranks the batch's mean";
  } else {
    o << "; element " << bad << ": expected " << want[bad] << ", got " << got[bad]
      << ". The sum over the ranks of (share of the tokens × the rank's gradient) is the "
         "batch's gradient";
  }
  return o.str();
}

DTW_TEST_STEPS(SpGradientTest, "07.1");
TEST(SpGradientTest, StepZerosSummedGradientsEqualOneDevicesBeforeTheOptimizer) {
  for (int p : {2, 3}) {
    const train::RunSpec spec = tiny(24, 1);
    DTW_TRACE("summed gradients of step 0, before the optimizer, gpt-tiny on " << p
                                                                                << " ranks");
    dtw::testing::launch_bounded(p, [&](Comm& comm) {
      const int r = comm.rank();
      train::Replica<double> one(spec, comm.exec(), train::ReplicaPlan::whole(spec));
      const double want_loss = one.forward_backward(0, 0, 1);

      const model::ModelShard shard = model::ModelShard::sequence(r, p, SequenceSplit::kContiguous);
      GatheredAttention<double> core({.comm = &comm, .seq_len = spec.sequence()});
      CoreSeams seams(core);
      train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::slice(spec, shard));
      replica.set_seams(&seams);
      const double loss = sum_weighted_gradients(replica, comm, 0, shard);

      const std::string prefix = "rank " + std::to_string(r) + ", step 0: ";
      std::string bad = gradient_difference(prefix + "the loss", p, std::span(&want_loss, 1),
                                            std::span(&loss, 1));
      for (const model::ParamView& view : one.layout().views()) {
        if (!bad.empty()) break;
        bad = gradient_difference(prefix + "the gradient of " + view.name, p,
                                  one.tensor(view.name).grads, replica.tensor(view.name).grads);
      }
      if (!bad.empty()) ADD_FAILURE() << bad;
    });
  }
}

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

DTW_TEST_STEPS(SpRingZigZagTest, "07.1", "07.3");  // the model gives the runs
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
