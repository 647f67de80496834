// dtw run DEMO: runs one chapter demo with the solution (with --lab: with the
// learner's library, in the chapter's lab-run program) and shows what every
// rank found, the traffic it caused and, for a deadlock demo, the detector's report.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "commands.h"
#include "demo_runner.h"
#include "dtw/config.h"
#include "mpi_launch.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {
namespace {

std::string trim_end(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// dtw run DEMO --lab: the same arguments, to the demo's chapter's lab-run program.
[[noreturn]] void hand_over_to_lab(const Demo& demo, const RunOptions& options) {
  const Context context = load_context();
  const Chapter& chapter = find_chapter(context.chapters, demo.chapter);
  if (chapter.lab_run.empty() || !fs::exists(chapter.lab_run))
    throw UsageError(fmt::format("the lab-run program of chapter {} is not built ({}); ./dtw "
                                 "builds it",
                                 chapter.id, chapter.lab_run.string()));
  std::vector<std::string> argv{chapter.lab_run.string(), "run"};
  argv.insert(argv.end(), options.words.begin(), options.words.end());
  if (options.ranks > 0) argv.insert(argv.end(), {"--ranks", std::to_string(options.ranks)});
  argv.insert(argv.end(), {"--backend", options.backend});
  if (!options.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", options.hostfile});
  if (!options.trace.empty()) argv.insert(argv.end(), {"--trace", options.trace});
  exec_program(argv);
  throw std::runtime_error(
      fmt::format("cannot run {}: {}", chapter.lab_run.string(), std::strerror(errno)));
}

// A rank of a --lab run hit a DTW_TODO: say which step, plainly.
void print_not_implemented(const Demo& demo, const RankError& e) {
  static const std::regex kStep(R"(^(?:rank \d+: )?(\d\d\.\d+): (.*?)(?: \(NotImplemented\))?(?: \[.*)?$)");
  const std::string first_line = e.message.substr(0, e.message.find('\n'));
  std::smatch m;
  if (!std::regex_match(first_line, m, kStep)) {
    fmt::print("\n{} {}\n", paint(Paint::kRed, "NotImplemented:"), e.message);
    return;
  }
  fmt::print("\n{} your lab has not written step {} yet ({}), and rank {} needed it.\n  "
             "./dtw check {} {} tests it; ./dtw run {} runs the demo with the solution.\n",
             paint(Paint::kYellow, "Not written yet:"), m[1].str(), m[2].str(), e.rank,
             demo.chapter, m[1].str(), demo.name);
}

}  // namespace

int run_command(const RunOptions& options) {
  if (options.list) {
    fmt::print("{}\n{}", paint(Paint::kBold, "Demos (dtw run NAME [--ranks N]):"), demo_list());
    return 0;
  }
  const std::vector<std::string>& words = options.words;
  const bool pitfall = !words.empty() && words[0] == "pitfall";
  if (pitfall && words.size() == 1) {
    fmt::print("{}\n{}", paint(Paint::kBold, "Pitfalls (dtw run pitfall NAME): bugs from the "
                                             "field, each caught by the workbench:"),
               demo_list(/*pitfalls=*/true));
    return 0;
  }
  if (words.empty())
    throw UsageError("dtw run needs a demo name; the demos are:\n" + demo_list());
  if (!pitfall && words.size() > 1)
    throw UsageError(fmt::format("dtw run takes one demo name, not '{} {}' (or: dtw run pitfall NAME)",
                                 words[0], words[1]));
  const Demo& demo = find_demo(pitfall ? words[1] : words[0]);
  if (options.lab && !options.lab_program) hand_over_to_lab(demo, options);
  if (pitfall && demo.catches.empty())
    throw UsageError(fmt::format("'{}' is a demo, not a pitfall: dtw run {}; the pitfalls are:\n{}",
                                 demo.name, demo.name, demo_list(true)));
  const bool on_mpi = options.backend == "mpi";
  if (!options.hostfile.empty() && !on_mpi)
    throw UsageError("--hostfile only applies to --backend mpi");
  if (on_mpi && !DTW_HAVE_MPI)
    throw UsageError("this build has no mpi backend: install OpenMPI (./dtw setup) and rebuild");
  // Under a hand-written `mpirun -np N dtw run ...` without --ranks, the job's size decides.
  const int ranks = options.ranks > 0                  ? options.ranks
                    : on_mpi && inside_mpirun()        ? mpi_job_size()
                                                       : demo.default_ranks;
  if (ranks < demo.min_ranks)
    throw UsageError(
        fmt::format("demo '{}' needs at least {} ranks, not {}", demo.name, demo.min_ranks, ranks));
  if (on_mpi && !inside_mpirun()) {
    std::vector<std::string> forward;
    if (!options.trace.empty()) forward = {"--trace", options.trace};
    exec_mpirun({demo.name, ranks, options.hostfile, forward});
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
      fmt::print("{}\n", paint(Paint::kDim, "(on MPI a deadlock is a real hang: after 5 s the "
                                            "watchdog prints what each rank waits for and aborts "
                                            "the job with exit status 3)"));
    std::fflush(stdout);
  }
  DemoOutcome outcome = run_demo(demo, ranks, options.backend, !options.trace.empty(), timeout);
  if (on_mpi) share_checks_over_mpi(outcome.checks);
  if (!printing) return outcome.correct() ? 0 : 1;

  for (std::size_t r = 0; r < outcome.checks.size(); ++r) {
    const std::optional<DemoCheck>& check = outcome.checks[r];
    if (!check) continue;
    fmt::print("  rank {:<3} {} {}\n", r,
               check->correct ? paint_padded(Paint::kGreen, "ok", 5)
                              : paint_padded(Paint::kRed, "WRONG", 5),
               check->detail);
  }
  if (outcome.deadlock) {
    const bool intended = demo.expects_deadlock;
    fmt::print("\n{}\n{}\n",
               paint(intended ? Paint::kYellow : Paint::kRed,
                     intended ? "DeadlockError, as this demo intends -- the detector's report:"
                              : "DeadlockError:"),
               trim_end(outcome.deadlock->message));
  }
  bool not_written = false;
  for (const RankError& e : outcome.failures) {
    if (e.kind == "NotImplemented") {
      // One line for the first rank that hit a DTW_TODO; the others hit the same.
      if (!not_written) print_not_implemented(demo, e);
      not_written = true;
      continue;
    }
    fmt::print("\n{} {}\n", paint(Paint::kRed, e.kind + ":"), e.message);
  }

  fmt::print("\n{}\n{}",
             paint(Paint::kBold, "Traffic (bytes sent, row = from rank, column = to rank):"),
             outcome.report.traffic_table());
  std::string summary = fmt::format("time {}, {} moved", human_seconds(outcome.report.seconds),
                                    human_bytes(static_cast<double>(outcome.report.total_bytes())));
  if (outcome.busbw_gbps() > 0) summary += fmt::format(", busbw {:.2f} GB/s", outcome.busbw_gbps());
  fmt::print("{}\n", summary);

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
    return 1;
  }
  if (demo.expects_deadlock) {
    if (!outcome.deadlock) {
      print_error(fmt::format("demo '{}' should have deadlocked, but it {}", demo.name,
                              outcome.correct() ? "finished" : "failed otherwise"));
      return 1;
    }
    fmt::print("{}\n",
               paint(Paint::kDim, "(exit status 1: the program deadlocked, which is the point)"));
    return 1;
  }
  if (!outcome.correct()) {
    print_error(fmt::format("demo '{}' gave a wrong result or failed", demo.name));
    return 1;
  }
  return 0;
}

}  // namespace dtw::cli
