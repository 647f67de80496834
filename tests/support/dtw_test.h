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
#include <cstdint>
#include <cmath>
#include <exception>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
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
// Adds `own` (innermost first), then `live` (innermost first), to `e`.
inline void attach_context(Error& e, const std::vector<std::string>& own,
                           const std::vector<ContextLine>& live) {
  for (const std::string& text : own) e.add_note(text);
  for (auto it = live.rbegin(); it != live.rend(); ++it) e.add_note(it->text);
}

// How far each rank of one launch has got through its DTW_TRACE scopes, for
// a deadlock's report. In a loop of cases (a sweep) every rank opens the same
// scopes in the same order, so of the ranks a deadlock stops, the one that
// has opened the fewest is the one behind: the others ran on into later cases
// and block there, and its case is where the work got stuck. Without this, a
// deadlock read "while: ..., root 0" from a rank that had moved on, when the
// stuck broadcast was the one with root 2.
class LaunchProgress {
 public:
  // Rank `rank` has opened `opened` scopes; `lines` are its live ones,
  // innermost first.
  void publish(int rank, std::uint64_t opened, std::vector<std::string> lines) {
    std::lock_guard lock(mu_);
    at_[rank] = {opened, std::move(lines)};
  }
  // A rank of this process starts; it later finishes, or stops with an error
  // (its scopes then stay published as they were).
  void enter() {
    std::lock_guard lock(mu_);
    ++running_;
  }
  void finish(int rank) {
    std::lock_guard lock(mu_);
    at_.erase(rank);
    --running_;
    stopped_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mu_);
    --running_;
    stopped_.notify_all();
  }
  // Waits, at most `limit`, until no rank of this process runs. After a
  // deadlock every rank stops soon; until then a rank whose last call has
  // completed but which has not yet run on may still look behind (it is in
  // the previous case), and would be named instead of the stuck one.
  void wait_until_stopped(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    stopped_.wait_for(lock, limit, [&] { return running_ <= 0 || disabled_; });
  }
  // A second rank on one thread: the ranks are fibers sharing its
  // thread-local state, so nothing here can be told apart; stop.
  void disable() {
    std::lock_guard lock(mu_);
    disabled_ = true;
    stopped_.notify_all();
  }
  // The live lines of the rank behind, as its scopes were when it stopped
  // (`mine` when this rank is among the ranks behind, or nothing is known).
  std::vector<std::string> behind(int rank, std::vector<std::string> mine) {
    std::lock_guard lock(mu_);
    if (disabled_) return mine;
    const auto own = at_.find(rank);
    const std::uint64_t my_opened = own == at_.end() ? ~std::uint64_t{0} : own->second.opened;
    const Entry* least = nullptr;
    for (const auto& [r, entry] : at_)
      if (!entry.lines.empty() && (least == nullptr || entry.opened < least->opened)) least = &entry;
    if (least == nullptr || least->opened >= my_opened) return mine;
    return least->lines;
  }

 private:
  struct Entry {
    std::uint64_t opened = 0;
    std::vector<std::string> lines;
  };
  std::mutex mu_;
  std::condition_variable stopped_;
  std::map<int, Entry> at_;
  int running_ = 0;
  bool disabled_ = false;
};

// The launch and rank this thread runs, and the scopes it has opened there.
struct RankProgress {
  LaunchProgress* launch = nullptr;
  int rank = -1;
  std::uint64_t opened = 0;
};
inline RankProgress& rank_progress() {
  thread_local RankProgress progress;
  return progress;
}
// Publishes this thread's live lines, innermost first (a rank thread's
// live_context() holds its own scopes only).
inline void publish_progress() {
  RankProgress& p = rank_progress();
  if (p.launch == nullptr) return;
  std::vector<std::string> lines;
  for (auto it = live_context().rbegin(); it != live_context().rend(); ++it)
    lines.push_back(it->text);
  p.launch->publish(p.rank, p.opened, std::move(lines));
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
    ++detail::rank_progress().opened;
    detail::publish_progress();
  }
  ~ScopedContext() {
    std::vector<ContextLine>& live = detail::live_context();
    // Unwinding: the scopes stay published as they were when the rank stopped.
    const bool unwinding = std::uncaught_exceptions() > uncaught_;
    if (unwinding) detail::unwound_context().push_back(std::move(live.back().text));
    live.pop_back();
    if (!unwinding) detail::publish_progress();
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
/// context of the DTW_TRACE scopes it left and then the calling thread's. A
/// DeadlockError (or TimeoutError) carries the scopes of the rank that is
/// behind instead (detail::LaunchProgress): the stuck case, on every rank.
/// The LaunchWrapper this header installs.
inline RankFunction with_context(const RankFunction& fn) {
  auto progress = std::make_shared<detail::LaunchProgress>();
  return [outer = detail::live_context(), fn, progress](Comm& comm) {
    std::vector<std::unique_ptr<::testing::ScopedTrace>> traces;
    for (const ContextLine& line : outer)
      traces.push_back(std::make_unique<::testing::ScopedTrace>(line.file, line.line, line.text));
    const ::testing::ScopedTrace rank(__FILE__, __LINE__,
                                      "rank " + std::to_string(comm.rank()) + " of " +
                                          std::to_string(comm.size()));
    detail::unwound_context().clear();
    const detail::RankProgress saved = detail::rank_progress();
    if (saved.launch == progress.get()) progress->disable();
    detail::rank_progress() = {progress.get(), comm.rank(), 0};
    progress->enter();
    try {
      fn(comm);
    } catch (Error& e) {
      std::vector<std::string> own = std::move(detail::unwound_context());
      detail::unwound_context().clear();
      progress->stop();
      if (dynamic_cast<const DeadlockError*>(&e) != nullptr) {
        progress->wait_until_stopped(std::chrono::seconds(2));
        own = progress->behind(comm.rank(), std::move(own));
      }
      detail::attach_context(e, own, outer);
      detail::rank_progress() = saved;
      throw;
    } catch (...) {
      progress->stop();
      detail::rank_progress() = saved;
      throw;
    }
    progress->finish(comm.rank());
    detail::rank_progress() = saved;
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
