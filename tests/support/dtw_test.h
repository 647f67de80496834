#pragma once
// Helpers every dtw test uses:
//  - bounded launches, so a wrong lab fails instead of hanging;
//  - DTW_TRACE, a SCOPED_TRACE that crosses threads: context set on the
//    launching thread is attached to every failure raised on any rank thread
//    of every launch (gtest's own trace is per thread), and to the message of
//    an error a rank raises ("while: ..."). Including this header installs the
//    LaunchWrapper that does it (dtw::set_launch_wrapper), so it works for
//    worlds any code launches: launch_bounded, dtw::launch, the training
//    harness;
//  - comparisons whose failure names the rank, the index, the expected and the
//    received value in the one format `dtw check` reads back:
//      "rank 2, index 17: expected 3.5, got 0"
//  - DTW_TEST_STEPS, which says which lab steps a suite's tests run the code of
//    (chapter tests only; see dtw_test_steps.h).
#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <sstream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test_steps.h"

namespace dtw::testing {

/// One line of context set with DTW_TRACE.
struct ContextLine {
  const char* file;
  int line;
  std::string text;
};

namespace detail {
// The DTW_TRACE lines alive on this thread, outermost first.
inline std::vector<ContextLine>& live_context() {
  thread_local std::vector<ContextLine> lines;
  return lines;
}
// The lines whose scopes an exception in flight has left on this thread,
// innermost first: what the thread was doing when it threw.
inline std::vector<std::string>& unwound_context() {
  thread_local std::vector<std::string> lines;
  return lines;
}
// Adds the unwound lines of this thread, then `live` (innermost first), to `e`.
inline void attach_context(Error& e, const std::vector<ContextLine>& live) {
  for (const std::string& text : unwound_context()) e.add_note(text);
  unwound_context().clear();
  for (auto it = live.rbegin(); it != live.rend(); ++it) e.add_note(it->text);
}
}  // namespace detail

/// What DTW_TRACE creates: a gtest ScopedTrace on this thread, remembered so
/// that launch_bounded can repeat it on every rank thread.
class ScopedContext {
 public:
  ScopedContext(const char* file, int line, std::string text)
      : trace_(file, line, text), uncaught_(std::uncaught_exceptions()) {
    detail::unwound_context().clear();  // an earlier exception was handled
    detail::live_context().push_back({file, line, std::move(text)});
  }
  ~ScopedContext() {
    std::vector<ContextLine>& live = detail::live_context();
    if (std::uncaught_exceptions() > uncaught_)
      detail::unwound_context().push_back(std::move(live.back().text));
    live.pop_back();
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  ::testing::ScopedTrace trace_;
  int uncaught_;
};

/// Streams its arguments into a string (for DTW_TRACE's message).
class Text {
 public:
  template <class T>
  Text& operator<<(const T& value) {
    out_ << value;
    return *this;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

/// `fn`, run with the calling thread's DTW_TRACE lines (and "rank R of P") as
/// gtest traces on the rank thread; an error it throws carries, as notes, the
/// context of the DTW_TRACE scopes it left and then the calling thread's.
/// The LaunchWrapper this header installs.
inline RankFunction with_context(const RankFunction& fn) {
  return [outer = detail::live_context(), fn](Comm& comm) {
    std::vector<std::unique_ptr<::testing::ScopedTrace>> traces;
    for (const ContextLine& line : outer)
      traces.push_back(std::make_unique<::testing::ScopedTrace>(line.file, line.line, line.text));
    const ::testing::ScopedTrace rank(__FILE__, __LINE__,
                                      "rank " + std::to_string(comm.rank()) + " of " +
                                          std::to_string(comm.size()));
    detail::unwound_context().clear();
    try {
      fn(comm);
    } catch (Error& e) {
      detail::attach_context(e, outer);
      throw;
    }
  };
}

namespace detail {
inline const bool kContextWrapperInstalled = [] {
  set_launch_wrapper(&with_context);
  return true;
}();
}  // namespace detail

/// A launch whose every blocked call gives up after `options.timeout`.
inline Report launch_bounded(int world, const LaunchOptions& options, const RankFunction& fn) {
  return launch(world, options, fn);
}

/// launch_bounded with a time limit of `timeout` per blocked call.
inline Report launch_bounded(int world, const RankFunction& fn,
                             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  LaunchOptions options;
  options.timeout = timeout;
  return launch_bounded(world, options, fn);
}

/// launch_collecting (errors in the report, not thrown), bounded like launch_bounded.
inline Report launch_collecting_bounded(int world, const LaunchOptions& options,
                                        const RankFunction& fn) {
  return launch_collecting(world, options, fn);
}

/// `v` as text: a floating-point value in the fewest digits that read back as
/// exactly `v` (so two values that differ never print alike: -1.479 and
/// -1.4790001), an integer or a byte as a number.
template <class T>
std::string exact_text(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(+v);
  } else {
    // float and double as themselves; other number types (half) through
    // double, which holds them exactly.
    using Wide = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, static_cast<Wide>(v));
    return std::string(text, result.ptr);
  }
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
      out << "rank " << rank << ", index " << i << ": expected " << exact_text(expected[i])
          << ", got " << exact_text(got[i]);
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

#define DTW_TEST_CONCAT_INNER_(a, b) a##b
#define DTW_TEST_CONCAT_(a, b) DTW_TEST_CONCAT_INNER_(a, b)

/// Like SCOPED_TRACE, and also seen by every rank thread of a launch_bounded
/// world started in its scope: `DTW_TRACE("p " << p << ", n " << n);`
#define DTW_TRACE(message)                                              \
  const ::dtw::testing::ScopedContext DTW_TEST_CONCAT_(dtw_trace_, __LINE__)( \
      __FILE__, __LINE__, (::dtw::testing::Text() << message).str())

/// Fails the current test (from any rank thread) with the first mismatch.
#define DTW_EXPECT_SAME(rank, expected, got, ...)                                   \
  do {                                                                             \
    const std::string dtw_mismatch_ =                                              \
        ::dtw::testing::compare((rank), (expected), (got) __VA_OPT__(, ) __VA_ARGS__); \
    EXPECT_TRUE(dtw_mismatch_.empty()) << dtw_mismatch_;                           \
  } while (0)
