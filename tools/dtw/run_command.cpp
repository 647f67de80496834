// dtw run DEMO: runs one chapter demo with the solution (with --lab: with the
// learner's library, in the chapter's lab-run program) and shows what every
// rank found, the traffic it caused and, for a deadlock demo, the detector's report.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>

#include "commands.h"
#include "demo_runner.h"
#include "exit_codes.h"
#include "lab_run.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/output_file.h"
#include "mpi_launch.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {
namespace {

std::string trim_end(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Beyond this many ranks the terminal gets summaries; --json has everything.
constexpr std::size_t kRankLines = 16;
// Failures printed in full; the others are counted by kind.
constexpr std::size_t kFullFailures = 3;

// "0-5, 7, 9-11" (at most 8 runs, then "...").
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < ranks.size(); ++runs) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == 8) return out + ", ...";
    if (i > 0) out += ", ";
    out += j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]);
    i = j + 1;
  }
  return out;
}

void print_check(std::size_t rank, const DemoCheck& check) {
  fmt::print("  rank {:<3} {} {}\n", rank,
             check.correct ? paint_padded(Paint::kGreen, "ok", 5) : paint_padded(Paint::kRed, "WRONG", 5),
             check.detail);
}

// Every rank's line in a small world; in a large one rank 0's, those of the
// first wrong ranks, and a count.
void print_checks(const DemoOutcome& outcome) {
  const auto& checks = outcome.checks;
  if (checks.size() <= kRankLines) {
    for (std::size_t r = 0; r < checks.size(); ++r)
      if (checks[r]) print_check(r, *checks[r]);
    return;
  }
  std::vector<int> ok, wrong, none;
  for (std::size_t r = 0; r < checks.size(); ++r)
    (!checks[r] ? none : checks[r]->correct ? ok : wrong).push_back(static_cast<int>(r));
  if (checks[0]) print_check(0, *checks[0]);
  std::size_t shown = 0;
  for (int r : wrong)
    if (r != 0 && shown++ < kRankLines / 2) print_check(static_cast<std::size_t>(r), *checks[r]);
  fmt::print("  {} ranks: {} ok, {} wrong{}, {} without a result{}\n", checks.size(), ok.size(),
             wrong.size(), wrong.empty() ? "" : " (" + ranks_text(wrong) + ")", none.size(),
             none.empty() ? "" : " (" + ranks_text(none) + ")");
}

// The first failures in full, the others counted by kind with their ranks.
void print_failures(const std::vector<RankError>& failures) {
  for (std::size_t i = 0; i < failures.size() && i < kFullFailures; ++i)
    fmt::print("\n{} {}\n", paint(Paint::kRed, failures[i].kind + ":"), failures[i].message);
  if (failures.size() <= kFullFailures) return;
  std::map<std::string, std::vector<int>> by_kind;
  for (std::size_t i = kFullFailures; i < failures.size(); ++i)
    by_kind[failures[i].kind].push_back(failures[i].rank);
  fmt::print("\n{} more failure(s):\n", failures.size() - kFullFailures);
  for (auto& [kind, ranks] : by_kind) {
    std::sort(ranks.begin(), ranks.end());
    fmt::print("  {} {} on rank(s) {}\n", ranks.size(), kind, ranks_text(ranks));
  }
}

// traffic as a dense JSON matrix, [[row of src 0], ...], written row by row
// from the links used: the file has world² numbers, the memory never does.
void write_matrix(std::ostream& f, const TrafficMatrix& traffic, std::int64_t Link::*field) {
  f << '[';
  for (int s = 0; s < traffic.world_size(); ++s) {
    const std::span<const Link> row = traffic.links_from(s);
    auto next = row.begin();
    f << (s ? ",[" : "[");
    for (int d = 0; d < traffic.world_size(); ++d) {
      std::int64_t value = 0;
      if (next != row.end() && next->dst == d) value = (*next++).*field;
      f << (d ? "," : "") << value;
    }
    f << ']';
  }
  f << ']';
}

void write_json(const std::string& path, const Demo& demo, const DemoOutcome& outcome) {
  nlohmann::json checks = nlohmann::json::array(), errors = nlohmann::json::array();
  for (const std::optional<DemoCheck>& c : outcome.checks)
    checks.push_back(c ? nlohmann::json{{"correct", c->correct}, {"detail", c->detail}}
                       : nlohmann::json(nullptr));
  for (const RankError& e : outcome.report.errors)
    errors.push_back({{"rank", e.rank}, {"kind", e.kind}, {"message", e.message}});
  const nlohmann::json out = {{"demo", demo.name},
                              {"ranks", outcome.report.world_size},
                              {"backend", outcome.report.backend},
                              {"seconds", outcome.report.seconds},
                              {"correct", outcome.correct()},
                              {"checks", checks},
                              {"errors", errors},
                              {"bytes", nullptr},      // written by write_matrix
                              {"messages", nullptr}};  // likewise
  std::ofstream f(path);
  // The keys in nlohmann's (sorted) order, as out.dump() would write them.
  f << '{';
  for (auto it = out.begin(); it != out.end(); ++it) {
    f << (it == out.begin() ? "" : ",") << nlohmann::json(it.key()).dump() << ':';
    if (it.key() == "bytes") write_matrix(f, outcome.report.traffic, &Link::bytes);
    else if (it.key() == "messages") write_matrix(f, outcome.report.traffic, &Link::messages);
    else f << it.value().dump();
  }
  f << "}\n";
  f.close();  // a full disk may show only here
  DTW_CHECK(!f.fail(), Error, "dtw run --json: could not write " << path);
}

// dtw run DEMO --lab: the same arguments, to the demo's chapter's lab-run program.
[[noreturn]] void hand_over_to_lab(const Demo& demo, const RunOptions& options) {
  std::vector<std::string> args{"run"};
  args.insert(args.end(), options.words.begin(), options.words.end());
  if (options.ranks > 0) args.insert(args.end(), {"--ranks", std::to_string(options.ranks)});
  args.insert(args.end(), {"--backend", options.backend});
  if (!options.hostfile.empty()) args.insert(args.end(), {"--hostfile", options.hostfile});
  if (!options.trace.empty()) args.insert(args.end(), {"--trace", options.trace});
  if (!options.json.empty()) args.insert(args.end(), {"--json", options.json});
  exec_lab_run(demo.chapter, args);
}

// A rank of a --lab run hit a DTW_TODO: say which step, plainly.
void print_not_implemented(const Demo& demo, const RankError& e) {
  if (const std::optional<NotWritten> w = not_written(e.message))
    print_not_written(*w, demo.chapter, fmt::format("rank {}", e.rank),
                      fmt::format("./dtw run {} runs the demo with the solution", demo.name));
  else
    fmt::print("\n{} {}\n", paint(Paint::kRed, "NotImplemented:"), e.message);
}

// dtw's exit status for an ordinary demo's outcome: 0 every rank's result
// right; 3 the run failed (a rank raised an error, a deadlock, a lab step not
// written); 1 it ran to the end but a result was wrong (a check failed).
int status_of(const DemoOutcome& outcome) {
  if (outcome.correct()) return kExitOk;
  if (!outcome.failures.empty() || outcome.deadlock) return kExitRunFailed;
  return kExitCheckFailed;
}

}  // namespace

int run_command(const RunOptions& options) {
  const std::vector<std::string>& words = options.words;
  const bool pitfall = !words.empty() && words[0] == "pitfall";
  if (options.list || (pitfall && words.size() == 1)) {
    // A listing runs nothing: an option for a run, or a name, would be ignored.
    const bool run_options = options.ranks > 0 || options.backend != "threads" || options.lab ||
                             !options.trace.empty() || !options.json.empty() ||
                             !options.hostfile.empty();
    if (run_options || (options.list && !words.empty()))
      throw UsageError(fmt::format("dtw run {} lists and runs nothing: give it no {}",
                                   options.list ? "--list" : "pitfall",
                                   run_options ? "--ranks, --backend, --lab, --trace, --json "
                                                 "or --hostfile"
                                               : "demo name (dtw run NAME runs one)"));
  }
  if (options.list) {
    fmt::print("{}\n{}", paint(Paint::kBold, "Demos (dtw run NAME [--ranks N]):"), demo_list());
    return 0;
  }
  if (pitfall && words.size() == 1) {
    fmt::print("{}\n{}", paint(Paint::kBold, "Pitfalls (dtw run pitfall NAME): bugs from the "
                                             "field, each caught by the workbench:"),
               demo_list(/*pitfalls=*/true));
    return 0;
  }
  if (words.empty())
    throw UsageError("dtw run needs a demo name; the demos are:\n" + demo_list());
  if (words.size() > (pitfall ? 2u : 1u))
    throw UsageError(fmt::format("dtw run takes one demo name (dtw run NAME) or one pitfall "
                                 "(dtw run pitfall NAME), not '{}'",
                                 fmt::join(words, " ")));
  const Demo& demo = find_demo(pitfall ? words[1] : words[0], pitfall);
  if (options.lab && !options.lab_program) hand_over_to_lab(demo, options);
  if (pitfall && demo.catches.empty())
    throw UsageError(fmt::format("'{}' is a demo, not a pitfall: dtw run {}; the pitfalls are:\n{}",
                                 demo.name, demo.name, demo_list(true)));
  // An output that cannot be written fails now, not after the run.
  if (!options.trace.empty()) check_writable(options.trace, "dtw run --trace");
  if (!options.json.empty()) check_writable(options.json, "dtw run --json");
  check_distinct_outputs({{options.trace, "dtw run --trace"}, {options.json, "dtw run --json"}});
  const bool on_mpi = options.backend == "mpi";
  if (!options.hostfile.empty() && !on_mpi)
    throw UsageError("--hostfile only applies to --backend mpi");
  if (on_mpi && !DTW_HAVE_MPI)
    throw UsageError("this build has no mpi backend: install OpenMPI (./dtw setup) and rebuild");
  // Under a hand-written `mpirun -np N dtw run ...` without --ranks, the job's size decides.
  const int ranks = options.ranks > 0                  ? options.ranks
                    : on_mpi && inside_mpirun()        ? mpi_job_size()
                                                       : demo.default_ranks;
  check_demo_ranks(demo, ranks);
  {
    // What launch would refuse (an unknown backend, a bad
    // DTW_MPI_WATCHDOG_SECONDS) is refused now: before the header names the
    // backend, and before mpirun starts processes that would each refuse it.
    LaunchOptions probe;
    probe.backend = options.backend;
    check_launch_options(ranks, probe);
  }
  if (on_mpi && !inside_mpirun()) {
    std::vector<std::string> args{"run", demo.name, "--backend", "mpi", "--ranks",
                                  std::to_string(ranks)};
    if (!options.trace.empty()) args.insert(args.end(), {"--trace", options.trace});
    if (!options.json.empty()) args.insert(args.end(), {"--json", options.json});
    return run_mpirun({args, ranks, options.hostfile});
  }
  // Under mpirun every process runs its rank; only rank 0 prints.
  const bool printing = is_printing_process();
  if (on_mpi && ranks > mpi_job_size()) {
    if (!printing) return 2;
    throw UsageError(fmt::format(
        "--ranks {} but mpirun started {} process(es): use mpirun -np {}, or let dtw start "
        "mpirun (dtw run {} --backend mpi --ranks {})",
        ranks, mpi_job_size(), ranks, demo.name, ranks));
  }
  // A deliberate hang is caught on MPI by the watchdog, which aborts the job;
  // a short limit keeps that demo from waiting a minute.
  const std::chrono::milliseconds timeout =
      on_mpi && demo.expects_deadlock ? std::chrono::seconds(5) : std::chrono::seconds(60);
  if (printing) {
    fmt::print("{} {}\n",
               paint(Paint::kBold,
                     fmt::format("{} (chapter {}) on {} rank(s), {} backend, {}:", demo.name,
                                 demo.chapter, ranks, options.backend,
                                 options.lab_program ? "with your lab" : "with the solution")),
               paint(Paint::kDim, demo.description));
    if (on_mpi && demo.expects_deadlock)
      fmt::print("{}\n", paint(Paint::kDim,
                               fmt::format("(on MPI a deadlock is a real hang{}: after 5 s the "
                                           "watchdog prints what each rank waits for and aborts "
                                           "the job with exit status 3)",
                                           demo.catches.empty()
                                               ? ""
                                               : ", with no detector to name the cycle and catch "
                                                 "the pitfall as on threads")));
    std::fflush(stdout);
  }
  DemoOutcome outcome = run_demo(demo, ranks, options.backend, !options.trace.empty(), timeout);
  if (on_mpi) share_checks_over_mpi(outcome.checks);
  // Rank 0 judges pitfalls and deadlock demos (their other processes fail by
  // design); for the rest every process ends with the same status as rank 0.
  if (!printing) return demo.catches.empty() && !demo.expects_deadlock ? status_of(outcome) : 0;

  print_checks(outcome);
  if (outcome.deadlock) {
    const bool intended = demo.expects_deadlock;
    fmt::print("\n{}\n{}\n",
               paint(intended ? Paint::kYellow : Paint::kRed,
                     intended ? "DeadlockError, as this demo intends -- the detector's report:"
                              : "DeadlockError:"),
               trim_end(outcome.deadlock->message));
  }
  std::vector<RankError> others;
  bool not_written = false;
  for (const RankError& e : outcome.failures) {
    if (e.kind == "NotImplemented") {
      // One line for the first rank that hit a DTW_TODO; the others hit the same.
      if (!not_written) print_not_implemented(demo, e);
      not_written = true;
      continue;
    }
    others.push_back(e);
  }
  print_failures(others);

  fmt::print("\n{}\n{}",
             paint(Paint::kBold, ranks <= static_cast<int>(kRankLines)
                                     ? "Traffic (bytes sent, row = from rank, column = to rank):"
                                     : "Traffic (the full matrix: --json FILE):"),
             outcome.report.traffic_table());
  std::string summary = fmt::format("time {}, {} moved", human_seconds(outcome.report.seconds),
                                    human_bytes(static_cast<double>(outcome.report.total_bytes())));
  if (outcome.busbw_gbps() > 0)
    summary += fmt::format(", busbw {}", bandwidth_text(outcome.busbw_gbps() * 1e9));
  fmt::print("{}\n", summary);

  if (!options.json.empty()) {
    write_json(options.json, demo, outcome);
    fmt::print("outcome written to {} (checks, errors, traffic matrix)\n", options.json);
  }
  if (!options.trace.empty() && outcome.report.trace.empty()) {
    // Every rank stopped before its first message or phase (a DTW_TODO at the start).
    fmt::print("no trace written to {}: no rank got as far as a message\n", options.trace);
  } else if (!options.trace.empty()) {
    outcome.report.write_trace(options.trace);
    fmt::print("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)\n",
               options.trace);
  }
  if (!demo.catches.empty()) {
    if (const RankError* caught = pitfall_catch(demo, outcome)) {
      fmt::print("{}\n  {}\n",
                 paint(Paint::kYellow, "Pitfall caught, as intended: the workbench stopped the "
                                       "broken run with"),
                 trim_end(caught->message));
      return 0;
    }
    print_error(fmt::format("pitfall '{}' was not caught: no rank failed with a message "
                            "containing \"{}\"",
                            demo.name, demo.catches));
    return kExitCheckFailed;
  }
  if (demo.expects_deadlock) {
    if (!outcome.deadlock) {
      print_error(fmt::format("demo '{}' should have deadlocked, but it {}", demo.name,
                              outcome.correct() ? "finished" : "failed otherwise"));
      return kExitCheckFailed;
    }
    // A deadlock is a run that failed (exit 3), here as on MPI, where the
    // watchdog aborts the job with that status; the point of this demo.
    fmt::print("{}\n",
               paint(Paint::kDim, "(exit status 3: the run deadlocked, which is the point)"));
    return kExitRunFailed;
  }
  const int status = status_of(outcome);
  if (status == kExitRunFailed && not_written && others.empty()) {
    // Like `dtw train --lab`: the run could not go on (exit 3), nothing was wrong yet.
    print_error(fmt::format("demo '{}' stopped at a step your lab has not written", demo.name));
  } else if (status == kExitRunFailed) {
    print_error(fmt::format("demo '{}' failed: {}", demo.name,
                            outcome.deadlock ? "it deadlocked" : "a rank raised an error"));
  } else if (status != kExitOk) {
    print_error(fmt::format("demo '{}' gave a wrong result", demo.name));
  }
  return status;
}

}  // namespace dtw::cli
