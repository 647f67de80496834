#pragma once
// Helpers every dtw test uses: a bounded launch, and comparisons whose failure
// message names the rank, the index, the expected and the received value in
// the one format `dtw check` reads back:
//   "rank 2, index 17: expected 3.5, got 0"
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "dtw/dtw.h"

namespace dtw::testing {

/// A launch whose every blocked call gives up after `timeout`, so a bug makes
/// the test fail instead of hanging CI.
inline Report launch_bounded(int world, const RankFunction& fn,
                             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  LaunchOptions options;
  options.timeout = timeout;
  return launch(world, options, fn);
}

/// Empty when `got` equals `expected` within `tolerance` (relative to
/// max(1, |expected|)); otherwise the first mismatch in the format above.
template <class T>
std::string compare(int rank, std::span<const T> expected, std::span<const T> got,
                    double tolerance = 0) {
  std::ostringstream out;
  if (expected.size() != got.size()) {
    out << "rank " << rank << ": expected " << expected.size() << " elements, got " << got.size();
    return out.str();
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double e = static_cast<double>(expected[i]), g = static_cast<double>(got[i]);
    const bool same = tolerance == 0 ? expected[i] == got[i]
                                     : std::abs(e - g) <= tolerance * std::max(1.0, std::abs(e));
    if (!same) {
      out << "rank " << rank << ", index " << i << ": expected " << +expected[i] << ", got " << +got[i];
      return out.str();
    }
  }
  return {};
}

template <class T>
std::string compare(int rank, const std::vector<T>& expected, const std::vector<T>& got,
                    double tolerance = 0) {
  return compare<T>(rank, std::span<const T>(expected), std::span<const T>(got), tolerance);
}

}  // namespace dtw::testing

/// Fails the current test (from any rank thread) with the first mismatch.
#define DTW_EXPECT_SAME(rank, expected, got, ...)                                   \
  do {                                                                             \
    const std::string dtw_mismatch_ =                                              \
        ::dtw::testing::compare((rank), (expected), (got) __VA_OPT__(, ) __VA_ARGS__); \
    EXPECT_TRUE(dtw_mismatch_.empty()) << dtw_mismatch_;                           \
  } while (0)
