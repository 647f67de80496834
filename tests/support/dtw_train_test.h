#pragma once
// Test helpers of the training layer: the comparison with the reference as a
// GoogleTest expectation, usable inside a rank function (threads or MPI).
#include <gtest/gtest.h>

#include <string>

#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "dtw_test.h"  // DTW_TRACE and DTW_TEST_STEPS for training chapters too

namespace dtw::testing {

/// The context line of a training run, for DTW_TRACE:
/// "gpt-tiny on 3 ranks, 5 steps of 12 rows, float64, micro_batches=2".
inline std::string describe_run(const train::RunSpec& spec, int ranks,
                                const train::Knobs& knobs = {}) {
  std::string text = spec.model + " on " + std::to_string(ranks) + " rank" +
                     (ranks == 1 ? "" : "s") + ", " + std::to_string(spec.steps) + " steps of " +
                     std::to_string(spec.batch) + " rows, " + train::name_of(spec.dtype);
  const std::string set = knobs.describe();
  return set.empty() ? text : text + ", " + set;
}

}  // namespace dtw::testing

/// DTW_TRACE of a training run (describe_run): every failure inside its scope,
/// on any rank, says which run it was.
#define DTW_TRACE_RUN(...) DTW_TRACE(::dtw::testing::describe_run(__VA_ARGS__))

/// Fails the current test (from any rank) unless `params` (elements [begin,
/// begin + size) of the flat buffer after the run) and `losses` match the
/// reference run of `spec`; the message names the rank, the step, the first
/// divergent tensor element, expected, got, the relative error and the
/// tolerance. An optional sixth argument is the tolerance.
#define DTW_EXPECT_MATCHES_REFERENCE(rank, spec, losses, params, begin, ...)              \
  do {                                                                                    \
    const auto& dtw_params_ = (params);                                                   \
    using dtw_value_ = std::remove_cv_t<std::remove_reference_t<decltype(*std::data(dtw_params_))>>; \
    const ::dtw::train::ReferenceCheck dtw_check_ =                                       \
        ::dtw::train::compare_to_reference<dtw_value_>(                                   \
            (rank), (spec), (losses),                                                     \
            std::span<const dtw_value_>(std::data(dtw_params_), std::size(dtw_params_)),  \
            (begin)__VA_OPT__(, ) __VA_ARGS__);                                           \
    EXPECT_TRUE(dtw_check_.ok) << dtw_check_.message;                                     \
  } while (0)
