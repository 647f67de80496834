#pragma once
// Runs one registered demo on a fresh world and judges the outcome; shared by
// dtw run and dtw tour.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dtw/demo.h"
#include "dtw/launch.h"

namespace dtw::cli {

struct DemoOutcome {
  Report report;
  std::vector<std::optional<DemoCheck>> checks;  // per rank; empty where the rank failed
  std::optional<RankError> deadlock;             // the first DeadlockError, if any
  std::vector<RankError> failures;               // errors that are causes, not AbortedError

  /// Every rank checked its result and found it right, and nothing failed.
  bool correct() const;
  /// The largest bus bandwidth a rank reported, 0 if none.
  double busbw_gbps() const;
};

/// The demo called `name`; throws UsageError listing the demos (with
/// `pitfall`, the pitfalls) when none is.
const Demo& find_demo(const std::string& name, bool pitfall = false);

/// The world sizes `demo` accepts: "2+", "1-12" or "2".
std::string demo_ranks(const Demo& demo);
/// Throws UsageError naming the demo, its range and `ranks` when the demo
/// does not run on `ranks` ranks (Demo::min_ranks, Demo::max_ranks).
void check_demo_ranks(const Demo& demo, int ranks);

/// Every demo (or, with `pitfalls`, every pitfall), one per line:
/// "  name  ch NN, N rank(s) (RANGE)  description".
std::string demo_list(bool pitfalls = false);

/// For a pitfall (Demo::catches), the failure whose message shows the
/// workbench caught it; nullptr when none does (or for an ordinary demo).
const RankError* pitfall_catch(const Demo& demo, const DemoOutcome& outcome);

/// Runs `demo` on `ranks` ranks (0: its default); never throws for a rank's failure.
DemoOutcome run_demo(const Demo& demo, int ranks, const std::string& backend, bool trace,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// "ok", "WRONG", "deadlock caught" (when the demo expects one) or "no deadlock".
std::string verdict(const Demo& demo, const DemoOutcome& outcome);
/// True when the verdict is what the demo intends.
bool as_intended(const Demo& demo, const DemoOutcome& outcome);

}  // namespace dtw::cli
