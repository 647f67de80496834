#pragma once
// What chapter 08's tests share: a small GPT in double that every layout of
// 4, 6 and 8 ranks can cut, harness options, and the run of one layout.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_expect_error.h"
#include "dtw_train_test.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08::testing {

/// `ranks` ranks; a blocked call gives up after 20 s (a test never hangs).
inline train::HarnessOptions on(int ranks, bool compare = true) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(20);
  o.compare = compare;
  return o;
}

/// gpt-tiny (4 heads, 2 blocks: 4 units) in double: 3 steps of 8 sequences,
/// one warm-up step, a clip of 0.05 that binds (a norm summed over the wrong
/// group shows).
inline train::RunSpec tiny(std::int64_t steps = 3, std::int64_t batch = 8) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = batch;
  spec.warmup_steps = 1;
  spec.clip_norm = 0.05;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

/// A GPT that t = 3 divides: 12 heads of 4, 192 hidden units, 24 tokens.
inline train::RunSpec twelve_heads(std::int64_t batch = 6) {
  train::RunSpec spec = tiny(2, batch);
  model::ModelConfig c = spec.config();
  c.name = "gpt-tiny-12-heads";
  c.dim = 48;
  c.heads = 12;
  c.mlp_hidden = 192;
  spec.model = c.name;
  spec.custom_config = c;
  spec.seq_len = 24;
  return spec;
}

/// A layout.
inline Layout layout(int pp, int dp, int tp, int m, bool zero1 = false) {
  return Layout{.pp = pp, .dp = dp, .tp = tp, .micro_batches = m, .zero1 = zero1};
}

/// Trains `spec` with `l` on l.ranks() ranks and compares with the reference.
inline train::RunOutcome run_layout(const train::RunSpec& spec, const Layout& l) {
  return train::run_ranks<double>(spec, on(l.ranks()),
                                  [&](train::RankRun<double>& run) { train_hybrid(run, l); });
}

}  // namespace dtw::ch08::testing
