// Replica: holds what its plan says (counted exactly by the ledger), computes
// the whole model's gradient, clips and steps shards exactly as the whole, and
// names bad plans and caps.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/memory.h"
#include "dtw/model/gpt.h"
#include "dtw/train/replica.h"

namespace dtw::train {
namespace {

RunSpec tiny(const std::string& model) {
  RunSpec spec = standard_run(model);
  spec.steps = 2;
  spec.batch = 4;
  spec.dtype = DType::kFloat64;
  return spec;
}

Exec counted(int rank, std::int64_t cap = 0) {
  return Exec::host().with_ledger(std::make_shared<MemoryLedger>(rank, cap));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReplicaTest, LedgerHoldsExactlyTheLayoutsBytesForGptSmall) {
  const RunSpec spec = standard_run("gpt-small");
  const Exec exec = counted(0);
  Replica<float> replica(spec, exec, ReplicaPlan::whole(spec));
  const std::int64_t n = replica.layout().size();
  const MemoryLedger& ledger = *exec.ledger();
  EXPECT_EQ(ledger.current(MemoryCategory::kParameters), n * 4);
  EXPECT_EQ(ledger.current(MemoryCategory::kGradients), n * 4);
  EXPECT_EQ(ledger.current(MemoryCategory::kOptimizerState), 2 * n * 4);  // AdamW's m and v
  EXPECT_EQ(ledger.current(MemoryCategory::kActivations), 0);
  RunSpec sgd = spec;
  sgd.optimizer = model::Optimizer::kSgd;
  const Exec exec2 = counted(0);
  Replica<double> r2(sgd, exec2, ReplicaPlan::whole(sgd));
  EXPECT_EQ(exec2.ledger()->current(MemoryCategory::kOptimizerState), n * 8);  // momentum only
}

TEST(ReplicaTest, ActivationsAreChargedDuringTheStepOnly) {
  const RunSpec spec = tiny("gpt-tiny");
  const Exec exec = counted(0);
  Replica<double> replica(spec, exec, ReplicaPlan::whole(spec));
  replica.forward_backward(0, 1, 2);
  const std::int64_t expected =
      replica.network().activation_bytes(replica.network().all(), make_batch(spec, 0, 1, 2));
  EXPECT_EQ(exec.ledger()->peak(MemoryCategory::kActivations), expected);
  EXPECT_EQ(exec.ledger()->current(MemoryCategory::kActivations), 0);
}

TEST(ReplicaTest, ACapBelowTheParametersIsOutOfMemoryNamingRankAndCategory) {
  const RunSpec spec = tiny("gpt-tiny");
  const std::string e = error_of([&] {
    Replica<double> replica(spec, counted(3, 1000), ReplicaPlan::whole(spec));
  });
  EXPECT_NE(e.find("rank 3"), std::string::npos) << e;
  EXPECT_NE(e.find("parameters"), std::string::npos) << e;
}

TEST(ReplicaTest, BadPlansNameTheRankAndTheRanges) {
  const RunSpec spec = tiny("mlp-tiny");
  const std::int64_t n = model::param_layout(spec.config()).size();
  std::string e = error_of([&] { Replica<double>(spec, counted(2), ReplicaPlan::range(0, n + 5)); });
  EXPECT_NE(e.find("rank 2: Replica: parameter range [0, " + std::to_string(n + 5) +
                   ") is outside the model's [0, " + std::to_string(n) + ")"),
            std::string::npos)
      << e;
  e = error_of([&] { Replica<double>(spec, counted(1), ReplicaPlan::ranges({{50, 90}, {10, 60}})); });
  EXPECT_NE(e.find("are not sorted and disjoint"), std::string::npos) << e;
  e = error_of([&] {
    Replica<double>(spec, counted(0), ReplicaPlan{{{0, 10}}, {{0, 10}}, {{5, 20}}});
  });
  EXPECT_NE(e.find("optimizer range [5, 20) is not inside"), std::string::npos) << e;
  Replica<double> part(spec, counted(4), ReplicaPlan::range(0, 100));
  e = error_of([&] { part.forward_backward(0, 0, 1); });
  EXPECT_NE(e.find("rank 4: Replica: a pass needs the parameters of unit fc.0"), std::string::npos)
      << e;
  e = error_of([&] { part.params(90, 120); });
  EXPECT_NE(e.find("[90, 120) is not inside one held parameter range; held: [0, 100)"),
            std::string::npos)
      << e;
}

TEST(ReplicaTest, ForwardBackwardIsTheModelsGradientOnTheShard) {
  const RunSpec spec = tiny("gpt-tiny");
  Replica<double> replica(spec, Exec::host(), ReplicaPlan::whole(spec));
  const double loss = replica.forward_backward(0, 1, 2, 0.5);
  model::Gpt<double> gpt(spec.config());
  std::vector<double> p(replica.params().begin(), replica.params().end());
  std::vector<double> g(p.size(), 0.0);
  const Batch b = make_batch(spec, 0, 1, 2);
  EXPECT_EQ(gpt.forward(p.data(), b.tokens.data(), b.targets.data(), b.rows, b.seq_len), loss);
  gpt.backward(p.data(), g.data(), 0.5);
  EXPECT_EQ(std::vector<double>(replica.grads().begin(), replica.grads().end()), g);
}

// A ZeRO-style split: two replicas stepping halves (with the global clip)
// end exactly where one replica stepping everything does.
TEST(ReplicaTest, ShardsClipAndStepExactlyLikeTheWhole) {
  for (model::Optimizer opt : {model::Optimizer::kAdamW, model::Optimizer::kSgd}) {
    RunSpec spec = tiny("gpt-tiny");
    spec.optimizer = opt;
    spec.clip_norm = 0.05;  // make sure clipping acts
    const std::int64_t n = model::param_layout(spec.config()).size(), cut = 31337;
    Replica<double> whole(spec, Exec::host(), ReplicaPlan::whole(spec));
    Replica<double> a(spec, Exec::host(), ReplicaPlan{{{0, n}}, {{0, n}}, {{0, cut}}});
    Replica<double> b(spec, Exec::host(), ReplicaPlan{{{0, n}}, {{0, n}}, {{cut, n}}});
    for (std::int64_t step = 0; step < 2; ++step) {
      whole.forward_backward(step, 0, 1);
      a.forward_backward(step, 0, 1);
      b.forward_backward(step, 0, 1);
      const double global = a.local_sum_of_squares() + b.local_sum_of_squares();
      EXPECT_NEAR(global, whole.local_sum_of_squares(), 1e-12 * global);
      const double norm = whole.clip(whole.local_sum_of_squares());
      EXPECT_GT(norm, spec.clip_norm);
      a.clip(global);
      b.clip(global);
      whole.step(step);
      a.step(step);
      b.step(step);
      // Each half steps only its own range (a ZeRO rank then allgathers).
      std::copy(a.params(0, cut).begin(), a.params(0, cut).end(), b.params(0, cut).begin());
      std::copy(b.params(cut, n).begin(), b.params(cut, n).end(), a.params(cut, n).begin());
    }
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(a.params()[i], whole.params()[i], 1e-12 * (1 + std::abs(whole.params()[i])))
          << "element " << i;
    EXPECT_EQ(a.grads()[0], 0.0);  // step() zeroed them
  }
}

// A checkpoint restores a shard's moments: copying them (and the parameters)
// into a fresh replica continues exactly as the original would.
TEST(ReplicaTest, OptimizerStateOfAShardCarriesTheRunOver) {
  for (model::Optimizer opt : {model::Optimizer::kAdamW, model::Optimizer::kSgd}) {
    RunSpec spec = tiny("mlp-tiny");
    spec.optimizer = opt;
    const std::int64_t n = model::param_layout(spec.config()).size(), cut = n / 3;
    const ReplicaPlan plan{{{0, n}}, {{0, n}}, {{0, cut}}};
    Replica<double> a(spec, Exec::host(), plan);
    EXPECT_EQ(a.optimizer_moments(), opt == model::Optimizer::kAdamW ? 2 : 1);
    a.forward_backward(0, 0, 1);
    a.step(0);
    Replica<double> b(spec, Exec::host(), plan);
    std::copy(a.params().begin(), a.params().end(), b.params().begin());
    for (int k = 0; k < a.optimizer_moments(); ++k) {
      const std::span<double> from = a.optimizer_state(k, 0, cut);
      EXPECT_NE(from[1], 0.0) << "moment " << k << " after a step";
      std::copy(from.begin(), from.end(), b.optimizer_state(k, 0, cut).begin());
    }
    a.forward_backward(1, 0, 1);
    a.step(1);
    b.forward_backward(1, 0, 1);
    b.step(1);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(a.params()[i], b.params()[i]) << "element " << i;
    EXPECT_NE(error_of([&] { a.optimizer_state(0, cut - 1, cut + 1); }).find("not inside one optimizer range"),
              std::string::npos);
    EXPECT_NE(error_of([&] { a.optimizer_state(2, 0, 1); }).find("moment 2"), std::string::npos);
  }
}

// A two-stage pipeline whose last stage holds the tied wte as a second piece.
TEST(ReplicaTest, StagePassesOfTwoStagesGiveTheWholeGradient) {
  const RunSpec spec = tiny("gpt-tiny");  // units: embed h.0 h.1 head
  Replica<double> whole(spec, Exec::host(), ReplicaPlan::whole(spec));
  whole.forward_backward(0, 0, 1);
  const auto& units = whole.units();
  const auto& wte = whole.layout().find("wte");
  const Exec e0 = counted(0), e1 = counted(1);
  Replica<double> first(spec, e0, ReplicaPlan::range(0, units[2].begin));
  Replica<double> last(spec, e1,
                       ReplicaPlan::ranges({{0, wte.size}, {units[2].begin, units[3].end}}));
  const Batch batch = make_batch(spec, 0);
  StagePass<double> s0(first), s1(last);
  s0.forward({0, 2}, batch);
  EXPECT_EQ(e0.ledger()->current(MemoryCategory::kActivations), s0.charged_bytes());
  const double loss = s1.forward({2, 4}, batch, s0.output());
  EXPECT_GT(loss, 0.0);
  s1.backward({}, 1.0);
  s0.backward(s1.input_grad(), 1.0);
  EXPECT_EQ(e0.ledger()->current(MemoryCategory::kActivations), 0);
  // wte's gradient is the sum of the two stages' shares (Megatron's
  // embedding-group allreduce); everything else is one stage's own.
  for (std::int64_t i = 0; i < wte.size; ++i)
    ASSERT_NEAR(first.grads()[i] + last.grads(0, wte.size)[i], whole.grads()[i], 1e-15)
        << "wte[" << i << "]";
  for (std::int64_t i = wte.size; i < units[2].begin; ++i) ASSERT_EQ(first.grads()[i], whole.grads()[i]);
  const auto tail = last.grads(units[2].begin, units[3].end);
  for (std::int64_t i = units[2].begin; i < units[3].end; ++i)
    ASSERT_EQ(tail[i - units[2].begin], whole.grads()[i]) << "element " << i;
}

}  // namespace
}  // namespace dtw::train
