#pragma once
/// @file
/// Demos: the runnable examples behind `dtw run` and `dtw tour`.
///
/// A chapter registers its demos with DTW_REGISTER_DEMO in a demo source file;
/// the dtw program runs them with the chapter's solution.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/comm.h"

namespace dtw {

/// What one rank found when it checked its result against the reference.
struct DemoCheck {
  /// True when the rank's result matched the reference.
  bool correct = true;
  std::string detail;  ///< first mismatch, or a one-line summary ("alpha 3.1 us, beta 14 GB/s")
  double busbw_gbps = 0;  ///< bus bandwidth the demo measured, 0 when not meaningful
};

/// A runnable example.
struct Demo {
  std::string name;         ///< what `dtw run NAME` takes, e.g. "ping-pong"
  std::string chapter;      ///< "00"
  std::string description;  ///< one line for `dtw run --list` and the tour
  /// World size `dtw run` uses when `--ranks` is not given.
  int default_ranks = 2;
  /// Smallest world size the demo accepts.
  int min_ranks = 1;
  /// Largest world size the demo accepts (its data or its story fixes it:
  /// a global batch of 12 rows feeds at most 12 data shards); 0 for any.
  /// `dtw run` refuses a world outside [min_ranks, max_ranks] before it starts.
  int max_ranks = 0;
  /// The demo fails on purpose with a DeadlockError (shown, not a bug). A
  /// pitfall caught as a deadlock sets it too: on MPI, which has no deadlock
  /// detector, its run is a real hang, which `dtw run` announces and leaves
  /// to the watchdog after 5 s (exit status 3).
  bool expects_deadlock = false;
  /// Non-empty makes the demo a *pitfall*: a broken variant of a chapter's
  /// code, taken from a bug seen in the field, that the workbench must catch.
  /// The run is as intended when some rank fails (an error or a deadlock
  /// report) with a message containing this text, e.g. "diverged". Run with
  /// `dtw run pitfall NAME`; `dtw run pitfall` lists them. The description
  /// tells the story in a line and names its source.
  std::string catches;
  /// The bytes of data each rank holds at its peak, when the demo knows it
  /// (LaunchOptions::bytes_per_rank: the launch counts it in its memory
  /// estimate and refuses a world that cannot hold it); 0 when it is small.
  std::int64_t bytes_per_rank = 0;
  /// The code every rank runs; returns that rank's check of its result.
  std::function<DemoCheck(Comm&)> run;
};

/// Every registered demo, in registration order.
const std::vector<Demo>& demos();
/// Registers `demo`; returns true so it can initialise a static.
bool register_demo(Demo demo);

/// A bandwidth for a demo's line, with three significant digits in the unit
/// that keeps them: "12.3 GB/s", "4.17 MB/s", "950 B/s" ("0 B/s" for 0 or
/// less). A ring allreduce on 1024 ranks moves a few MB/s a rank, which
/// "%.2f GB/s" printed as "0.00 GB/s".
std::string bandwidth_text(double bytes_per_second);

}  // namespace dtw

#define DTW_DEMO_CONCAT2(a, b) a##b
#define DTW_DEMO_CONCAT(a, b) DTW_DEMO_CONCAT2(a, b)
/// Registers a demo at static-initialisation time:
/// `DTW_REGISTER_DEMO({.name = "ping-pong", .chapter = "00", ...});`
#define DTW_REGISTER_DEMO(...) \
  static const bool DTW_DEMO_CONCAT(dtw_demo_registered_, __LINE__) = ::dtw::register_demo(__VA_ARGS__)
