// What chapter 05's tests share: the runs they train, the (p, m) grid of the
// issue, and an oracle for schedules written here, independently of the
// lab's check_schedule (step 05.6), so steps 05.2 and 05.4 are judged on
// their own.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/train/fabric.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_train_test.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05::testing {

/// The (p, m) pairs every schedule must reproduce the reference on: one
/// rank, m < p, m = p, m not a multiple of p, and the chapter's p = 4, m = 8.
inline const std::vector<std::pair<int, int>> kGrid = {{1, 1}, {2, 1}, {2, 4}, {3, 5}, {4, 8}};

/// A short double run of `model` ("gpt-tiny", "mlp-tiny"). When the pipeline
/// needs more chunks than the model has units (gpt-tiny has 4, mlp-tiny 3),
/// the same widths with more layers (8 units: a GPT of 6 blocks, an MLP of 8
/// layers), named so that errors say which model ran.
inline train::RunSpec tiny(const std::string& model, int chunks = 1, std::int64_t steps = 3) {
  train::RunSpec spec = train::standard_run(model);
  spec.steps = steps;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  const model::ModelConfig base = model::model_config(model);
  const int units = base.kind == model::ModelKind::kGpt ? static_cast<int>(base.layers) + 2
                                                         : static_cast<int>(base.hidden.size()) + 1;
  if (chunks > units) {
    model::ModelConfig deep = base;
    if (deep.kind == model::ModelKind::kGpt) deep.layers = 6;
    else deep.hidden.assign(7, base.hidden.front());
    deep.name = model + "-8units";
    spec.model = deep.name;
    spec.custom_config = deep;
  }
  return spec;
}

/// A harness on p ranks whose every blocked call gives up after 20 s.
inline train::HarnessOptions on(int ranks, train::Knobs knobs = {}) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(20);
  o.knobs = std::move(knobs);
  return o;
}

/// Knobs: micro_batches=m plus `more` ("checkpoint=1", ...).
inline train::Knobs knobs(int m, const std::vector<std::string>& more = {}) {
  train::Knobs k;
  k.set("micro_batches", std::to_string(m));
  for (const std::string& kv : more) {
    const auto eq = kv.find('=');
    k.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return k;
}

/// The strategy function of `kind` in double.
inline void (*strategy_of(ScheduleKind kind))(train::RankRun<double>&) {
  switch (kind) {
    case ScheduleKind::kNaive: return pp_naive<double>;
    case ScheduleKind::kGPipe: return pp_gpipe<double>;
    case ScheduleKind::kOneFOneB: return pp_1f1b<double>;
    case ScheduleKind::kInterleaved: return pp_interleaved<double>;
  }
  return nullptr;
}

/// Trains `model` with `kind` on p ranks, m micro-batches and `more` knobs,
/// and expects every rank to match the reference and to know every loss.
inline void expect_matches(ScheduleKind kind, const std::string& model, int p, int m,
                           const std::vector<std::string>& more = {}, int v = 1) {
  const train::RunSpec spec = tiny(model, p * v);
  DTW_TRACE(name_of(kind) << ", " << ::dtw::testing::describe_run(spec, p, knobs(m, more)));
  const train::RunOutcome out =
      train::run_ranks<double>(spec, on(p, knobs(m, more)), strategy_of(kind));
  const std::string what = std::string(name_of(kind)) + " on " + spec.model + ", p = " +
                           std::to_string(p) + ", m = " + std::to_string(m);
  EXPECT_TRUE(out.matches) << what << ": " << out.mismatch;
  for (const train::RankOutcome& r : out.ranks)
    EXPECT_EQ(r.losses.size(), static_cast<std::size_t>(spec.steps)) << what << ", rank " << r.rank;
}

/// Trains `spec` on p ranks through the Executor alone, with nothing of
/// steps 05.1, 05.2 and 05.6: Megatron's equal-blocks split (balance=blocks),
/// each rank's replica plan written out here (its chunk's units, and wte on
/// the tied head's rank), and the given naive schedule (or `schedule`, a
/// list written by the test with Schedule::forward and backward). So step
/// 05.3 (and 05.5 with checkpointing) can be tested on its own.
inline train::RunOutcome run_hand_built(const train::RunSpec& spec, int p, int m,
                                        ExecutorOptions options, const Schedule* schedule = nullptr) {
  DTW_TRACE("hand-built naive stages, " << ::dtw::testing::describe_run(spec, p, knobs(m))
                                        << (options.checkpoint ? ", checkpointing" : ""));
  return train::run_ranks<double>(spec, on(p), [&](train::RankRun<double>& run) {
    const int r = run.comm().rank();
    const StageMap map = make_stage_map(spec, Balance::kBlocks, p, 1, m, nullptr);
    const model::ParamLayout layout = model::param_layout(spec.config());
    const auto units = model::model_units(spec.config(), layout);
    const model::UnitRange mine = map.chunks[static_cast<std::size_t>(r)];
    train::ReplicaPlan plan = train::ReplicaPlan::range(units[mine.begin].begin, units[mine.end - 1].end);
    const model::ModelConfig c = spec.config();
    if (model::head_is_tied(c) && p > 1 && r == p - 1) {
      const std::int64_t wte = layout.find("wte").size;
      plan.params.insert(plan.params.begin(), {0, wte});
      plan.grads.insert(plan.grads.begin(), {0, wte});
    }
    train::Replica<double> replica(spec, run.exec(), plan);
    Executor<double> executor(run, replica, map, options);
    const Schedule s = schedule ? *schedule : naive_schedule(p, m);
    for (std::int64_t step = 0; step < spec.steps; ++step)
      run.record_loss(step, executor.step(s.actions[static_cast<std::size_t>(r)], step, m));
    run.report(replica);
  });
}

/// GPipe's order written here with Schedule::forward and backward (step
/// 05.2 is not needed): every stage forwards micro-batches 0 … m−1, then
/// backwards them from the last: all m in flight at once.
inline Schedule all_in_flight(int p, int m) {
  Schedule s = naive_schedule(p, m);
  s.actions.assign(static_cast<std::size_t>(p), {});
  for (int st = 0; st < p; ++st) {
    for (int mb = 0; mb < m; ++mb) s.forward(st, mb);
    for (int mb = m - 1; mb >= 0; --mb) s.backward(st, mb);
  }
  return s;
}

/// A real run of `kind` on p ranks with m micro-batches (v chunks per rank)
/// replayed on ideal-8 (A100 compute, free messages): an MLP of p·v layers
/// all 128 wide, so every chunk costs the same, trained one step on 32 rows.
/// `measured`, when given, receives the run's own trace.
inline train::Replay ideal_replay(ScheduleKind kind, int p, int m, int v = 1,
                                  std::vector<TraceEvent>* measured = nullptr) {
  model::ModelConfig c = model::model_config("mlp-tiny");
  c.name = "mlp-equal-" + std::to_string(p * v);
  c.features = c.classes = 128;
  c.hidden.assign(static_cast<std::size_t>(p * v - 1), 128);
  train::RunSpec spec = train::standard_run("mlp-tiny");
  spec.model = c.name;
  spec.custom_config = c;
  spec.steps = 1;
  spec.batch = 32;
  train::HarnessOptions o = on(p, knobs(m, {"virtual_stages=" + std::to_string(v)}));
  if (kind != ScheduleKind::kInterleaved) o.knobs = knobs(m);
  o.trace = true;
  o.compare = false;  // the schedules' correctness is tested elsewhere
  const train::RunOutcome out = train::run_ranks<double>(spec, o, strategy_of(kind));
  if (measured) *measured = out.report.trace;
  return train::replay_on(out.report.trace, p, train::find_gpu_cluster("ideal-8"));
}

/// The bubble of `kind` on p ranks with m micro-batches (v chunks per rank)
/// on ideal_replay's run: the bubble of the pipeline itself, 1 − Σ (forward,
/// backward) / (p · the span from the first forward to the last backward),
/// which is what the formulas describe (the optimizer step after it is the
/// same on every rank and not part of the schedule). Computed here, apart
/// from the lab's pipeline_bubble (step 05.7), so the schedules are judged
/// on their own.
inline double ideal_bubble(ScheduleKind kind, int p, int m, int v = 1) {
  const train::Replay replay = ideal_replay(kind, p, m, v);
  double first = 1e300, last = -1e300, busy = 0;
  for (const TraceEvent& e : replay.events) {
    if (e.category != "compute" || e.stage < 0) continue;
    first = std::min(first, e.start_us);
    last = std::max(last, e.end_us);
    busy += e.end_us - e.start_us;
  }
  return 1 - busy / (p * (last - first));
}

/// What an oracle found wrong with a schedule ("" when it can run): every
/// needed message is sent once and received once, every (chunk, mb) is
/// forwarded before it is backwarded, and a dry run (sends never block,
/// receives wait for their send) finishes every list.
inline std::string oracle(const Schedule& s) {
  using Message = std::tuple<int, int, int>;  // dir, producing chunk, mb
  const int n = s.chunk_count();
  std::map<Message, int> sent, received;
  for (int r = 0; r < s.ranks; ++r) {
    std::set<std::pair<int, int>> forwarded, backwarded;
    for (const Action& a : s.actions[static_cast<std::size_t>(r)]) {
      if (a.chunk % s.ranks != r || a.mb < 0 || a.mb >= s.micro_batches)
        return "rank " + std::to_string(r) + " runs " + to_string(a);
      const int dir = static_cast<int>(a.dir);
      const int from = a.op == Op::kSend ? a.chunk : a.dir == Dir::kActivation ? a.chunk - 1 : a.chunk + 1;
      if (a.op == Op::kSend) ++sent[{dir, from, a.mb}];
      if (a.op == Op::kRecv) ++received[{dir, from, a.mb}];
      if (a.op == Op::kForward && !forwarded.insert({a.chunk, a.mb}).second) return "F twice: " + to_string(a);
      if (a.op == Op::kBackward && (!forwarded.count({a.chunk, a.mb}) || !backwarded.insert({a.chunk, a.mb}).second))
        return "B before F or twice: " + to_string(a);
    }
    if (forwarded.size() != static_cast<std::size_t>(s.micro_batches * s.virtual_stages) ||
        backwarded.size() != forwarded.size())
      return "rank " + std::to_string(r) + " misses a forward or backward";
  }
  const std::size_t messages = static_cast<std::size_t>(2 * (n - 1) * s.micro_batches);
  if (sent.size() != messages || received != sent) return "sends and receives do not pair";
  for (const auto& [msg, count] : sent)
    if (count != 1) return "a message is sent twice";
  std::vector<std::size_t> at(static_cast<std::size_t>(s.ranks), 0);
  std::set<Message> posted;
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < s.ranks; ++r) {
      const auto& list = s.actions[static_cast<std::size_t>(r)];
      for (std::size_t& i = at[static_cast<std::size_t>(r)]; i < list.size(); ++i, moved = true) {
        const Action& a = list[i];
        const int from = a.op == Op::kSend ? a.chunk : a.dir == Dir::kActivation ? a.chunk - 1 : a.chunk + 1;
        if (a.op == Op::kSend) posted.insert({static_cast<int>(a.dir), from, a.mb});
        if (a.op == Op::kRecv && !posted.count({static_cast<int>(a.dir), from, a.mb})) break;
      }
    }
  }
  for (int r = 0; r < s.ranks; ++r)
    if (at[static_cast<std::size_t>(r)] < s.actions[static_cast<std::size_t>(r)].size())
      return "deadlock: rank " + std::to_string(r) + " stuck at " +
             to_string(s.actions[static_cast<std::size_t>(r)][at[static_cast<std::size_t>(r)]]);
  return "";
}

/// The most (chunk, micro-batch) pairs rank r has forwarded and not yet
/// backwarded at any point of its list.
inline int max_in_flight(const Schedule& s, int r) {
  int now = 0, most = 0;
  for (const Action& a : s.actions[static_cast<std::size_t>(r)]) {
    if (a.op == Op::kForward) most = std::max(most, ++now);
    if (a.op == Op::kBackward) --now;
  }
  return most;
}

/// Calls `fn` and returns the message of the T it throws ("" and a failure
/// when it throws nothing).
template <class E, class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, got none";
  return "";
}

}  // namespace dtw::ch05::testing
