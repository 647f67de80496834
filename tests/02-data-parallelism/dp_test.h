#pragma once
// What chapter 02's tests share: the small runs they train, the harness
// options, and a check that a run fails with a clear error on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>

#include "data_parallelism.h"
#include "dtw/errors.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_expect_error.h"
#include "dtw_train_test.h"

namespace dtw::ch02::testing {

/// A strategy's rank function in double (the tests compare to 1e-9).
using Strategy = std::function<void(train::RankRun<double>&)>;

/// The standard run of `model`, made small: `steps` steps of `batch` rows in
/// double, 2 warm-up steps (so the learning rate changes during the run).
inline train::RunSpec tiny(const std::string& model, std::int64_t steps = 5,
                           std::int64_t batch = 12) {
  train::RunSpec spec = train::standard_run(model);
  spec.steps = steps;
  spec.batch = batch;
  spec.warmup_steps = 2;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

/// `ranks` rank threads (or processes under the MPI twin) whose blocked calls
/// give up after 20 s: a wrong lab fails, it never hangs.
inline train::HarnessOptions on(int ranks, train::Knobs knobs = {}) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(20);
  o.knobs = std::move(knobs);
  return o;
}

/// Runs `strategy` and expects it to match the reference on every rank.
inline train::RunOutcome expect_matches(const train::RunSpec& spec, int ranks,
                                        const Strategy& strategy, train::Knobs knobs = {}) {
  DTW_TRACE_RUN(spec, ranks, knobs);
  const train::RunOutcome out =
      train::run_ranks<double>(spec, on(ranks, std::move(knobs)), strategy);
  EXPECT_TRUE(out.matches) << spec.model << " on " << ranks << " ranks: " << out.mismatch;
  EXPECT_EQ(out.losses.size(), static_cast<std::size_t>(spec.steps))
      << spec.model << " on " << ranks << " ranks: losses recorded";
  EXPECT_EQ(out.ranks.size(), static_cast<std::size_t>(ranks));
  return out;
}

// The bad-input check shared by the training chapters (tests/support).
using dtw::testing::expect_error;

/// Elements of the model of `spec`.
inline std::int64_t model_size(const train::RunSpec& spec) {
  return model::param_layout(spec.config()).size();
}

}  // namespace dtw::ch02::testing
