#include "demo_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "manifest.h"

namespace dtw::cli {

bool DemoOutcome::correct() const {
  if (!failures.empty() || deadlock) return false;
  return std::ranges::all_of(checks,
                             [](const std::optional<DemoCheck>& c) { return c && c->correct; });
}

double DemoOutcome::busbw_gbps() const {
  double best = 0;
  for (const std::optional<DemoCheck>& c : checks)
    if (c) best = std::max(best, c->busbw_gbps);
  return best;
}

const Demo& find_demo(const std::string& name, bool pitfall) {
  for (const Demo& d : demos())
    if (d.name == name) return d;
  throw UsageError(fmt::format("no {} '{}'; the {}s are:\n{}", pitfall ? "pitfall" : "demo", name,
                               pitfall ? "pitfall" : "demo", demo_list(pitfall)));
}

std::string demo_list(bool pitfalls) {
  if (demos().empty()) return "  (none: no chapter registers a demo)\n";
  if (pitfalls && std::none_of(demos().begin(), demos().end(),
                               [](const Demo& d) { return !d.catches.empty(); }))
    return "  (none: no chapter registers a pitfall)\n";
  // "4 rank(s) (1-12)": the default world, then every world the demo accepts.
  const auto ranks_of = [](const Demo& d) {
    return fmt::format("{} rank(s) ({})", d.default_ranks, demo_ranks(d));
  };
  std::size_t width = 0, ranks_width = 0;
  for (const Demo& d : demos()) {
    width = std::max(width, d.name.size());
    ranks_width = std::max(ranks_width, ranks_of(d).size());
  }
  std::string out;
  for (const Demo& d : demos())
    if (d.catches.empty() == !pitfalls)
      out += fmt::format("  {:<{}}  ch {}, {:<{}}  {}\n", d.name, width, d.chapter, ranks_of(d),
                         ranks_width, d.description);
  return out;
}

std::string demo_ranks(const Demo& demo) {
  if (demo.max_ranks == 0) return fmt::format("{}+", demo.min_ranks);
  if (demo.max_ranks == demo.min_ranks) return std::to_string(demo.min_ranks);
  return fmt::format("{}-{}", demo.min_ranks, demo.max_ranks);
}

void check_demo_ranks(const Demo& demo, int ranks) {
  if (ranks >= demo.min_ranks && (demo.max_ranks == 0 || ranks <= demo.max_ranks)) return;
  throw UsageError(fmt::format("demo '{}' runs on {} ranks, not {}", demo.name,
                               demo.max_ranks == 0 ? fmt::format("at least {}", demo.min_ranks)
                               : demo.max_ranks == demo.min_ranks
                                   ? fmt::format("exactly {}", demo.min_ranks)
                                   : fmt::format("{} to {}", demo.min_ranks, demo.max_ranks),
                               ranks));
}

DemoOutcome run_demo(const Demo& demo, int ranks, const std::string& backend, bool trace,
                     std::chrono::milliseconds timeout) {
  if (ranks == 0) ranks = demo.default_ranks;
  check_demo_ranks(demo, ranks);
  DemoOutcome outcome;
  outcome.checks.resize(static_cast<std::size_t>(ranks));
  LaunchOptions options;
  options.backend = backend;
  options.timeout = timeout;
  options.trace = trace;
  options.bytes_per_rank = demo.bytes_per_rank;
  // Each rank writes only its own slot, so no lock is needed.
  outcome.report = launch_collecting(ranks, options, [&](Comm& comm) {
    outcome.checks[static_cast<std::size_t>(comm.rank())] = demo.run(comm);
  });
  for (const RankError& e : outcome.report.errors) {
    if (e.kind == "DeadlockError" && !outcome.deadlock) outcome.deadlock = e;
    if (e.kind != "AbortedError" && e.kind != "DeadlockError") outcome.failures.push_back(e);
  }
  return outcome;
}

// The message of the error (or deadlock report) that shows a pitfall was
// caught, or nullptr when nothing that failed names what it should.
const RankError* pitfall_catch(const Demo& demo, const DemoOutcome& outcome) {
  if (demo.catches.empty()) return nullptr;
  if (outcome.deadlock && outcome.deadlock->message.find(demo.catches) != std::string::npos)
    return &*outcome.deadlock;
  for (const RankError& e : outcome.failures)
    if (e.message.find(demo.catches) != std::string::npos) return &e;
  return nullptr;
}

std::string verdict(const Demo& demo, const DemoOutcome& outcome) {
  if (!demo.catches.empty()) return pitfall_catch(demo, outcome) ? "caught" : "NOT CAUGHT";
  if (demo.expects_deadlock) return outcome.deadlock ? "deadlock caught" : "no deadlock";
  return outcome.correct() ? "ok" : "WRONG";
}

bool as_intended(const Demo& demo, const DemoOutcome& outcome) {
  if (!demo.catches.empty()) return pitfall_catch(demo, outcome) != nullptr;
  return demo.expects_deadlock ? outcome.deadlock.has_value() : outcome.correct();
}

}  // namespace dtw::cli
