// Step 08.3 on its own: every rank of a grid holds a made-up gradient (the
// same function of the whole model's index on every slice, times replica + 1)
// and a made-up loss on the last stage; after hybrid_end_of_step the loss is
// the sum over the replicas counted once, and every stepped parameter equals
// one replica's step with the summed gradient clipped by the global norm --
// computed here from the formula, not by the code under test. The groups
// and the plans are made here too (from chapters 05 and 06), so that this
// step is tested on its own.
#include <cmath>

#include "dtw/chunks.h"
#include "dtw/reference.h"

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

// What rank `at` holds (step 08.2's rule, written out for this test).
train::ReplicaPlan plan_of(const train::RunSpec& spec, const Layout& l, const ch05::StageMap& map,
                           Coords at, bool zero1) {
  const model::ModelConfig c = spec.config();
  const model::ModelShard shard = ch06::megatron_shard(c, at.slice, l.tp);
  const model::ParamLayout local = model::param_layout(c, shard);
  train::ReplicaPlan plan = ch05::stage_plan(map, model::model_units(c, local),
                                             model::tied_wte(c, local).end, at.stage);
  plan.shard = shard;
  plan.replicated = train::Replication::uncut(local, at.slice, l.tp);
  if (zero1) {
    std::vector<train::Range> mine;
    for (const train::Range& r : plan.optimizer) {
      const Chunks chunks(r.size(), l.dp);
      const std::int64_t begin = r.begin + chunks.offset(at.replica);
      if (chunks.size(at.replica) > 0) mine.push_back({begin, begin + chunks.size(at.replica)});
    }
    plan.optimizer = mine;
  }
  return plan;
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
    const train::Grid grid(run.comm(), {{"pp", l.pp}, {"dp", l.dp}, {"tp", l.tp}});
    const Groups g{.pp = &grid.group("pp"), .dp = &grid.group("dp"), .tp = &grid.group("tp"),
                   .world = &grid.group({"pp", "dp", "tp"})};
    const Coords at{g.pp->rank(), g.dp->rank(), g.tp->rank()};
    const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, l.pp, 1, 1, nullptr);
    const train::ReplicaPlan plain = plan_of(spec, l, map, at, false);
    train::Replica<double> replica(spec, run.exec(), plan_of(spec, l, map, at, l.zero1));
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
    // The replicas of a stage and slice hold the same parameters after the
    // step (the gradient was summed over them, or gathered back under
    // ZeRO-1): compared here before the values, whose message could not
    // tell a missing sum from a wrong norm.
    {
      double mine = 0;
      for (const train::Range& r : plain.optimizer)
        for (double x : replica.params(r)) mine += x;
      std::vector<double> sums(static_cast<std::size_t>(l.dp));
      reference::allgather(*g.dp, std::span<const double>(&mine, 1), std::span<double>(sums));
      for (int d = 1; d < l.dp; ++d)
        if (sums[static_cast<std::size_t>(d)] != sums[0]) {
          ADD_FAILURE() << who << ": replicas 0 and " << d << " of this stage and slice hold "
                        << "different parameters after the step (sums " << sums[0] << " and "
                        << sums[static_cast<std::size_t>(d)] << "): "
                        << (l.zero1 ? "under ZeRO-1 each replica steps its own chunk: gather the "
                                      "stepped chunks back over dp"
                                    : "the gradients were not summed over the dp group");
          return;
        }
    }
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

DTW_TEST_STEPS(EndOfStepTest, "08.3");
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
