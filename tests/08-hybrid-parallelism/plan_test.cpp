// Step 08.2: what every rank holds, checked over all of them at once, in the
// whole model's indices: every element of the model is stepped by exactly as
// many ranks as the layout implies (each tp slice steps its own copy of a
// replicated tensor; every replica steps it without ZeRO-1, one replica's
// chunk with it), every rank holds the parameters and gradients of every
// element it steps, and the head's stage holds wte's slice but never steps
// it. No message moves: hybrid_plan is a pure function.
#include <map>
#include <sstream>

#include "hybrid_test.h"

namespace dtw::ch08 {
namespace {

using testing::layout;
using testing::tiny;

// The whole model's flat index of element `i` of a view of a shard's layout.
std::int64_t whole_offset(const model::ParamLayout& whole, const model::ParamView& v, std::int64_t i) {
  return whole.find(v.name).offset + v.slice.whole_index(i);
}

// A shard's layout; a model that is not a GPT is never cut.
model::ParamLayout layout_of(const model::ModelConfig& c, const model::ModelShard& shard) {
  return c.kind == model::ModelKind::kGpt ? model::param_layout(c, shard) : model::param_layout(c);
}

bool inside(const std::vector<train::Range>& ranges, std::int64_t x) {
  for (const train::Range& r : ranges)
    if (x >= r.begin && x < r.end) return true;
  return false;
}

void check_plans(const train::RunSpec& spec, const Layout& l) {
  DTW_TRACE("plans of hybrid " + l.describe());
  const model::ModelConfig c = spec.config();
  const model::ParamLayout whole = model::param_layout(c);
  const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, l.pp, 1, 1, nullptr);
  // steppers[element]: how many ranks step it; names for the message.
  std::vector<int> steppers(static_cast<std::size_t>(whole.size()), 0);
  for (int s = 0; s < l.pp; ++s)
    for (int d = 0; d < l.dp; ++d)
      for (int k = 0; k < l.tp; ++k) {
        const train::ReplicaPlan plan = hybrid_plan(spec, l, map, {s, d, k});
        const std::string who = "stage " + std::to_string(s) + ", replica " + std::to_string(d) +
                                ", slice " + std::to_string(k);
        if (c.kind == model::ModelKind::kGpt) {
          const model::IndexRange heads = plan.shard.heads.resolved(c.heads);
          ASSERT_EQ(heads.end - heads.begin, c.heads / l.tp)
              << who << ": the plan's shard holds heads [" << heads.begin << ", " << heads.end
              << "), not " << c.heads / l.tp << " of them (megatron_shard of its slice)";
        }
        const model::ParamLayout local = layout_of(c, plan.shard);
        for (const model::ParamView& v : local.views())
          for (std::int64_t i = 0; i < v.size; ++i) {
            const std::int64_t x = v.offset + i;
            if (!inside(plan.optimizer, x)) continue;
            ASSERT_TRUE(inside(plan.params, x) && inside(plan.grads, x))
                << who << " steps " << v.name << "[" << i << "] without holding its parameter and gradient";
            ++steppers[static_cast<std::size_t>(whole_offset(whole, v, i))];
          }
        // The units of its stage, of its own shard's layout.
        const std::vector<model::Unit> units = model::model_units(c, local);
        const model::UnitRange run = map.chunks[static_cast<std::size_t>(s)];
        const train::Range mine{units[static_cast<std::size_t>(run.begin)].begin,
                                units[static_cast<std::size_t>(run.end - 1)].end};
        EXPECT_TRUE(inside(plan.params, mine.begin) && inside(plan.params, mine.end - 1))
            << who << ": does not hold its stage's units [" << mine.begin << ", " << mine.end
            << ") of its shard's layout; it holds " << plan.describe();
        EXPECT_EQ(plan.replicated.group_size, l.tp) << who << ": the replicated tensors' group is the tp group";
        EXPECT_EQ(plan.replicated.group_rank, k) << who;
      }
  // Whole elements: replicated tensors are stepped by every slice.
  const model::ModelShard cut = c.kind == model::ModelKind::kGpt ? ch06::megatron_shard(c, 0, l.tp)
                                                                 : model::ModelShard{};
  const model::ParamLayout sliced = layout_of(c, cut);
  for (const model::ParamView& v : whole.views()) {
    const bool replicated = sliced.find(v.name).is_whole();
    const int want = (replicated ? l.tp : 1) * (l.zero1 ? 1 : l.dp);
    for (std::int64_t i = 0; i < v.size; ++i) {
      const int got = steppers[static_cast<std::size_t>(v.offset + i)];
      ASSERT_EQ(got, want) << v.name << "[" << i << "] is stepped by " << got << " ranks, not " << want
                           << (replicated ? " (a replicated tensor: once per slice" : " (cut: once")
                           << (l.zero1 ? ", and under ZeRO-1 by one replica only)" : ", on every replica)");
    }
  }
}

DTW_TEST_STEPS(PlanTest, "08.2");
TEST(PlanTest, EveryElementIsSteppedByTheRanksTheLayoutImplies) {
  for (const Layout& l : {layout(2, 2, 2, 1), layout(4, 1, 2, 1), layout(1, 1, 4, 1), layout(2, 1, 1, 1)})
    check_plans(tiny(), l);
}

TEST(PlanTest, UnderZeroOneEachElementIsSteppedByOneReplica) {
  for (const Layout& l : {layout(2, 2, 2, 1, true), layout(1, 4, 2, 1, true), layout(2, 3, 1, 1, true)})
    check_plans(tiny(), l);
}

TEST(PlanTest, AnMlpIsNeverCutAndItsStagesAndReplicasHoldTheRest) {
  // mlp-tiny: 3 units, no heads (tp 1 only).
  train::RunSpec spec = train::standard_run("mlp-tiny");
  spec.batch = 12;
  for (const Layout& l : {layout(3, 1, 1, 1), layout(1, 2, 1, 1, true), layout(3, 2, 1, 1, true)})
    check_plans(spec, l);
}

TEST(PlanTest, TheHeadsStageHoldsTheTiedWteSliceButNeverStepsIt) {
  const train::RunSpec spec = tiny();
  const Layout l = layout(2, 1, 2, 1);
  const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, 2, 1, 1, nullptr);
  for (int k = 0; k < 2; ++k) {
    const train::ReplicaPlan plan = hybrid_plan(spec, l, map, {1, 0, k});
    const model::ParamLayout local = model::param_layout(spec.config(), plan.shard);
    const model::ParamView& wte = local.find("wte");
    EXPECT_TRUE(inside(plan.params, wte.offset) && inside(plan.grads, wte.offset))
        << "slice " << k << ": the head's stage needs its slice of wte for the tied head: " << plan.describe();
    EXPECT_FALSE(inside(plan.optimizer, wte.offset))
        << "slice " << k << ": only the embedding's stage steps wte: " << plan.describe();
  }
}

}  // namespace
}  // namespace dtw::ch08
