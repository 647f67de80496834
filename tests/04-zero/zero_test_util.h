#pragma once
// What chapter 04's tests share: the tiny runs, the harness options, and the
// chapter's formulas computed here from first principles (units, chapter 01's
// Chunks and ring), independently of the solution's own formula code.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/model/params.h"
#include "dtw/model/units.h"
#include "dtw/train/strategy.h"
#include "dtw_train_test.h"
#include "zero.h"

namespace dtw::ch04::testing {

/// A few steps of `model` in double with a batch of 12 rows (5 ranks: uneven).
inline train::RunSpec tiny(const std::string& model, std::int64_t steps = 3) {
  train::RunSpec spec = train::standard_run(model);
  spec.steps = steps;
  spec.batch = 12;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

/// `ranks` ranks, blocked calls bounded (a wrong lab fails, never hangs).
inline train::HarnessOptions on(int ranks, std::vector<std::string> knobs = {}) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(30);
  o.knobs = train::Knobs::parse(knobs);
  return o;
}

/// Runs stage `stage` (3 with prefetch when `prefetch` > 0) of ZeRO.
inline train::RunOutcome run_stage(int stage, const train::RunSpec& spec,
                                   const train::HarnessOptions& o) {
  DTW_TRACE("zero" << stage << ", " << ::dtw::testing::describe_run(spec, o.ranks, o.knobs));
  return train::run_ranks<double>(spec, o, [stage](train::RankRun<double>& run) {
    if (stage == 1) zero1(run);
    if (stage == 2) zero2(run);
    if (stage == 3) zero3(run);
  });
}

/// The model's units.
inline std::vector<model::Unit> units_of(const train::RunSpec& spec) {
  const model::ModelConfig c = spec.config();
  return model::model_units(c, model::param_layout(c));
}

/// Elements rank r owns: chunk r of every unit.
inline std::int64_t owned(const train::RunSpec& spec, int p, int r) {
  std::int64_t n = 0;
  for (const model::Unit& u : units_of(spec)) n += Chunks(u.size(), p).size(r);
  return n;
}

/// Rank r's shards of every unit (its non-empty chunks, in unit order),
/// computed here from Chunks and not by Sharding::owned: the tests of a later
/// step that build a replica by hand then do not run step 04.1's code first
/// (so the untouched lab reaches every step's DTW_TODO).
inline std::vector<train::Range> owned_ranges(const train::RunSpec& spec, int p, int r) {
  std::vector<train::Range> out;
  for (const model::Unit& u : units_of(spec)) {
    const Chunks c(u.size(), p);
    if (c.size(r) > 0) out.push_back({u.begin + c.offset(r), u.begin + c.offset(r) + c.size(r)});
  }
  return out;
}

/// The most unit gradient buffers (elements) ZeRO-2/3 hold at once: one
/// unit's, except that a GPT's tied embedding is first written by the head's
/// backward and final only after the embedding's, so its buffer lives through
/// the whole backward beside each other unit's.
inline std::int64_t gradient_buffers_peak(const train::RunSpec& spec) {
  const std::vector<model::Unit> units = units_of(spec);
  const bool tied = model::head_is_tied(spec.config());
  std::int64_t most = 0;
  for (std::size_t u = tied ? 1 : 0; u < units.size(); ++u) most = std::max(most, units[u].size());
  return tied ? units[0].size() + most : most;
}

/// The most parameters (elements) ZeRO-3 without prefetch holds whole at
/// once: one unit, or at a tied head the head and the embedding it borrows.
inline std::int64_t gathered_peak(const train::RunSpec& spec) {
  const std::vector<model::Unit> units = units_of(spec);
  const bool tied = model::head_is_tied(spec.config());
  std::int64_t most = 0;
  for (const model::Unit& u : units) most = std::max(most, u.size());
  return std::max(most, units.back().size() + (tied ? units[0].size() : 0));
}

/// Bytes rank r sends in one step of stage `stage` with m micro-batches: per
/// unit, the ring reduce-scatter sends every chunk but r's, the ring
/// allgather every chunk but r+1's; ZeRO-3 gathers a GPT's tied embedding 3
/// times per pass (forward, and the head's borrow in forward and backward),
/// other units twice; then a ring allreduce of 2 doubles.
inline std::int64_t bytes_per_step(const train::RunSpec& spec, int stage, int p, int r, int m = 1) {
  const model::ModelConfig c = spec.config();
  const std::vector<model::Unit> units = units_of(spec);
  std::int64_t values = 0;
  for (std::size_t u = 0; u < units.size(); ++u) {
    const Chunks ch(units[u].size(), p);
    const std::int64_t rs = ch.total() - ch.size(r), ag = ch.total() - ch.size(r + 1);
    const int gathers = u == 0 && c.kind == model::ModelKind::kGpt ? 3 : 2;
    if (stage == 1) values += rs + ag;
    if (stage == 2) values += m * rs + ag;
    if (stage == 3) values += m * (rs + gathers * ag);
  }
  const Chunks two(2, p);
  return values * 8 + 8 * (4 - two.size(r) - two.size(r + 1));
}

/// Bytes rank r sent in `report` (to every peer).
inline std::int64_t bytes_sent(const Report& report, int r) {
  return report.traffic.bytes_sent(r);
}

/// "gpt-tiny on 3 ranks".
inline std::string where(const train::RunSpec& spec, int p) {
  return spec.model + " on " + std::to_string(p) + " ranks";
}

}  // namespace dtw::ch04::testing
