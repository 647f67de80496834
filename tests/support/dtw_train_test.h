#pragma once
// Test helpers of the training layer: the comparison with the reference as a
// GoogleTest expectation, usable inside a rank function (threads or MPI).
#include <gtest/gtest.h>

#include "dtw/train/reference.h"
#include "dtw_test.h"  // DTW_TRACE and DTW_TEST_STEPS for training chapters too

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
