// Step 08.3 on its own: every rank of a grid holds a made-up gradient (the
// same function of the whole model's index on every slice, times replica + 1)
// and a made-up loss on the last stage; after hybrid_end_of_step the loss is
// the sum over the replicas counted once, and every stepped parameter equals
// one replica's step with the summed gradient clipped by the global norm --
// computed here from the formula, not by the code under test.
#include <cmath>

#include "hybrid_test.h"

namespace dtw::ch08 {
namespace {

using testing::layout;
using testing::tiny;

double made_up(std::int64_t whole_index) { return 1e-3 * static_cast<double>(whole_index % 97 + 1); }

bool inside(const std::vector<train::Range>& ranges, std::int64_t begin, std::int64_t end) {
  for (const train::Range& r : ranges)
    if (begin >= r.begin && end <= r.end) return true;
  return false;
}

// Sets every held gradient of `replica` to made_up(whole index) × scale.
void fill(train::Replica<double>& replica, const model::ParamLayout& whole, double scale) {
  for (const model::ParamView& v : replica.layout().views()) {
    if (!inside(replica.plan().grads, v.offset, v.offset + v.size)) continue;
    const auto t = replica.tensor(v.name);
    for (std::int64_t i = 0; i < v.size; ++i)
      t.grads[static_cast<std::size_t>(i)] = made_up(whole.find(v.name).offset + t.whole_index(i)) * scale;
  }
}

void check_end_of_step(const Layout& l) {
  const train::RunSpec spec = tiny(1);
  DTW_TRACE("end of step of hybrid " + l.describe());
  const model::ParamLayout whole = model::param_layout(spec.config());
  const double replicas_sum = l.dp * (l.dp + 1) / 2.0;  // Σ (d + 1)
  double expected_loss = 0, global = 0;
  for (int d = 0; d < l.dp; ++d) expected_loss += 0.25 * (d + 1);
  for (std::int64_t x = 0; x < whole.size(); ++x) global += std::pow(made_up(x) * replicas_sum, 2);
  train::run_ranks<double>(spec, testing::on(l.ranks(), false), [&](train::RankRun<double>& run) {
    const train::Grid grid = make_grid(run.comm(), l);
    const Groups g = groups_of(grid);
    const Coords at{g.pp->rank(), g.dp->rank(), g.tp->rank()};
    const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, l.pp, 1, 1, nullptr);
    Layout unsharded = l;
    unsharded.zero1 = false;
    const train::ReplicaPlan plain = hybrid_plan(spec, unsharded, map, at);
    train::Replica<double> replica(spec, run.exec(), hybrid_plan(spec, l, map, at));
    fill(replica, whole, at.replica + 1);
    const double loss = at.stage == l.pp - 1 ? 0.25 * (at.replica + 1) : 0.0;
    const double got = hybrid_end_of_step(g, l, plain.optimizer,
                                          ch05::StepEnd<double>{run, *g.pp, replica, 0, loss});
    const std::string who = "rank " + std::to_string(run.comm().rank()) + " (stage " +
                            std::to_string(at.stage) + ", replica " + std::to_string(at.replica) +
                            ", slice " + std::to_string(at.slice) + ")";
    EXPECT_NEAR(got, expected_loss, 1e-12)
        << who << ": the loss is " << got << ", expected " << expected_loss << " ("
        << got / expected_loss << " times it: each replica's loss counts once, on one slice)";
    // One replica's step with the summed gradient and the global norm.
    train::Replica<double> expected(spec, run.exec(), plain);
    fill(expected, whole, replicas_sum);
    expected.clip(global);
    expected.step(0);
    for (const train::Range& r : plain.optimizer) {
      const std::span<double> want = expected.params(r), have = replica.params(r);
      for (std::size_t i = 0; i < want.size(); ++i)
        if (std::abs(have[i] - want[i]) > 1e-12 * std::max(1.0, std::abs(want[i]))) {
          ADD_FAILURE() << who << ": parameter " << r.begin + static_cast<std::int64_t>(i)
                        << " of its layout is " << have[i] << " after the step, expected " << want[i]
                        << " (the step of the gradient summed over the " << l.dp
                        << " replicas, clipped by the norm of the whole model's gradient, each "
                           "element counted once" << (l.zero1 ? "; under ZeRO-1 gathered back" : "")
                        << ")";
          return;
        }
    }
  });
}

DTW_TEST_STEPS(EndOfStepTest, "08.1", "08.2", "08.3");
TEST(EndOfStepTest, TheGradientIsSummedOverReplicasAndTheNormAndLossCountedOnce) {
  for (const Layout& l : {layout(2, 2, 2, 1), layout(1, 4, 2, 1), layout(2, 3, 1, 1), layout(4, 1, 2, 1)})
    check_end_of_step(l);
}

TEST(EndOfStepTest, ZeroOneStepsEachChunkOnceAndGathersItBack) {
  for (const Layout& l : {layout(2, 2, 2, 1, true), layout(1, 4, 2, 1, true), layout(2, 3, 1, 1, true)})
    check_end_of_step(l);
}

}  // namespace
}  // namespace dtw::ch08
