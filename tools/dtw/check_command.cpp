// dtw check NN [NN.K]: rebuild the chapter's lab, run the tests of each step
// (in the order of the chapter text; results of an unchanged lab come from the
// last run), and say per step where the learner stands; for the first step
// whose own tests fail, the failing check, its context and the step's hint.
#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "check_cache.h"
#include "commands.h"
#include "failure_report.h"
#include "hints.h"
#include "lab_results.h"
#include "style.h"

namespace dtw::cli {
namespace {

// The longest failure message `dtw check` shows without --verbose.
constexpr std::size_t kMessageLines = 5;
constexpr std::size_t kContextLines = 4;
// The longest part of a message shown whole past kMessageLines: a deadlock
// report's rank line and its (at most five) lines of operations.
constexpr std::size_t kLongestBlock = 6;
// The last lines of a crashed test program's output that its failure keeps.
constexpr std::size_t kCrashTailLines = 12;

Paint paint_for(StepState state) {
  switch (state) {
    case StepState::kPass: return Paint::kGreen;
    case StepState::kFail: return Paint::kRed;
    case StepState::kWaiting:
    case StepState::kInProgress: return Paint::kYellow;
    default: return Paint::kDim;
  }
}

// Builds the lab test program quietly; on failure prints the compiler's
// errors. Says "rebuilt your lab" when something was rebuilt.
bool build_lab(const Context& context, const Chapter& chapter) {
  const ProcessResult build =
      run_process({context.build.cmake.string(), "--build", context.build.build_dir.string(),
                   "--target", chapter.lab_target},
                  {.output = Output::kCapture});
  if (!build.ok()) {
    print_error(fmt::format("your lab of chapter {} does not compile; the compiler says:",
                            chapter.id));
    // The compiler's messages, without ninja's progress and command lines.
    std::istringstream lines(build.output);
    std::string out;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("[") || line.starts_with("FAILED:") || line.find(" -o ") != std::string::npos ||
          line.starts_with("ninja: build stopped"))
        continue;
      out += line + "\n";
    }
    fmt::print(stderr, "{}", out);
    return false;
  }
  if (build.output.find("no work to do") == std::string::npos)
    fmt::print("{}\n", paint(Paint::kDim, "(rebuilt your lab)"));
  return true;
}

// Prints the short hint of every region of `step` (each text once); a step
// with more than four places shows the first three and how many more, so
// that the report stays short (`dtw hint` lists them all).
void print_short_hints(const Chapter& chapter, const std::string& step) {
  std::vector<std::string> shown;
  for (const Hint& h : read_hints(chapter))
    if (h.step == step && std::ranges::find(shown, h.text) == shown.end()) shown.push_back(h.text);
  const std::size_t most = shown.size() > 4 ? 3 : shown.size();
  for (std::size_t i = 0; i < most; ++i)
    fmt::print("  {} {}\n", paint(Paint::kCyan, "hint " + step + ":"), shown[i]);
  if (most < shown.size())
    fmt::print("  {} {}\n", paint(Paint::kCyan, "hint " + step + ":"),
               fmt::format("... and {} more places of this step (./dtw hint {} {} lists them)",
                           shown.size() - most, chapter.id, step));
}

std::size_t indent_of(const std::string& line) {
  const std::size_t at = line.find_first_not_of(' ');
  return at == std::string::npos ? line.size() : at;
}

// Which lines of a failure message `dtw check` shows without --verbose. The
// message is cut into parts: the first line alone, then each line with the
// lines below it that are indented deeper (a deadlock report's rank: "rank 0
// in recv, waiting ... for:" and the operations it is blocked in). Parts are
// shown whole or not at all: the first ones, within kMessageLines - 2 lines;
// the first part of several lines even past that (a deadlock's first blocked
// rank with its operations and their decoded tags); the last part when it is
// one line (often the conclusion) but not a rank's state ("rank 1 running"),
// which depends on how far that rank got when the report was made and so
// would make the short form's length vary from run to run; the decoded tags
// of the operations shown,
// and no others. A part longer than any rank's (a table)
// may be cut: its first lines fill the kMessageLines - 2. Hiding a single
// line saves nothing: then everything is shown.
std::vector<bool> short_message(const std::vector<std::string>& m) {
  std::vector<bool> shown(m.size(), true);
  if (m.size() <= kMessageLines) return shown;
  std::vector<std::pair<std::size_t, std::size_t>> parts;  // [begin, end)
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (i <= 1 || indent_of(m[i]) <= indent_of(m[parts.back().first]))
      parts.emplace_back(i, i + 1);
    else
      parts.back().second = i + 1;
  }
  shown.assign(m.size(), false);
  const auto show = [&](const std::pair<std::size_t, std::size_t>& part) {
    for (std::size_t i = part.first; i < part.second; ++i) shown[i] = true;
  };
  const auto size = [](const std::pair<std::size_t, std::size_t>& part) {
    return part.second - part.first;
  };
  std::size_t used = 0, next = 0;
  for (; next < parts.size() && used + size(parts[next]) <= kMessageLines - 2; ++next) {
    show(parts[next]);
    used += size(parts[next]);
  }
  // A part too long to show whole (a table, not a rank) shows its first lines.
  if (next < parts.size() && size(parts[next]) > kLongestBlock)
    for (std::size_t i = parts[next].first; used < kMessageLines - 2; ++i, ++used) shown[i] = true;
  const bool block_shown =
      std::any_of(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(next),
                  [&](const auto& part) { return size(part) > 1; });
  if (!block_shown) {
    const auto block = std::find_if(parts.begin() + static_cast<std::ptrdiff_t>(next), parts.end(),
                                    [&](const auto& part) { return size(part) > 1; });
    if (block != parts.end() && size(*block) <= kLongestBlock) show(*block);
  }
  static const std::regex kRankState(R"(^\s+rank\s+\d+\s)");
  if (size(parts.back()) == 1 && !std::regex_search(m[parts.back().first], kRankState))
    show(parts.back());
  // A deadlock report ends with the decoded tags ("tag 200000000 = gradient
  // of micro-batch 0 from chunk 0 to chunk -1"): show the decoding of every
  // tag a shown operation waits on, which is often the line that locates a
  // wrong tag, and not the others.
  static const std::regex kTagUse(R"(tag (-?\d+)[,)])"), kTagDecoding(R"(^\s*tag (-?\d+) = )");
  std::set<std::string> used_tags;
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::smatch match;
    if (shown[i] && !std::regex_search(m[i], kTagDecoding) && std::regex_search(m[i], match, kTagUse))
      used_tags.insert(match[1].str());
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::smatch match;
    if (std::regex_search(m[i], match, kTagDecoding)) shown[i] = used_tags.contains(match[1].str());
  }
  if (std::count(shown.begin(), shown.end(), false) < 2) shown.assign(m.size(), true);
  return shown;
}

void print_failure(const Chapter& chapter, const StepStatus& status, bool verbose) {
  const TestResult& test = *status.first_failure;
  fmt::print("{} step {}, {}\n", paint(Paint::kRed, "First failure:"), status.step, test.name);
  const FailureReport report =
      parse_failure(test.failures.front(), chapter.source_dir.string() + "/");
  const std::vector<std::string>& m = report.message;
  const std::vector<bool> shown = verbose ? std::vector<bool>(m.size(), true) : short_message(m);
  for (std::size_t i = 0; i < m.size();) {
    if (!shown[i]) {
      std::size_t hidden = 0;
      for (; i < m.size() && !shown[i]; ++i) ++hidden;
      fmt::print("  {}\n", paint(Paint::kDim, fmt::format("... ({} more line{}: --verbose shows them)",
                                                         hidden, hidden == 1 ? "" : "s")));
      continue;
    }
    fmt::print("  {}\n", i == 0 ? paint(Paint::kBold, m[i]) : m[i]);
    ++i;
  }
  if (!report.location.empty())
    fmt::print("    {}\n", paint(Paint::kDim, "at " + report.location));
  for (std::size_t i = 0; i < report.context.size() && (verbose || i < kContextLines); ++i)
    fmt::print("  {} {}\n", paint(Paint::kDim, "while:"), report.context[i]);
  print_short_hints(chapter, status.step);
  const std::vector<std::string> files = step_files(chapter, status.step);
  fmt::print("  {}\n", paint(Paint::kDim, fmt::format("your code: {}", fmt::join(files, ", "))));
  if (test.failures.size() > 1 && verbose)
    for (std::size_t i = 1; i < test.failures.size(); ++i)
      fmt::print("\n{}\n", test.failures[i]);
  if (verbose && status.failing.size() > 1) {
    fmt::print("  {}\n", paint(Paint::kDim, fmt::format("every failing test of step {}:",
                                                        status.step)));
    for (const std::string& name : status.failing) fmt::print("    {}\n", name);
  }
  fmt::print("  {}\n", paint(Paint::kDim,
                             fmt::format("./dtw hint {} {} says more; ./dtw check {} {} reruns "
                                         "only this step{}.",
                                         chapter.id, status.step, chapter.id, status.step,
                                         verbose ? "" : "; --verbose shows the whole failure")));
}

void print_next(const Chapter& chapter, const StepStatus& status) {
  fmt::print("{} step {} ({}).\n", paint(Paint::kBold, "Next:"), status.step,
             state_label(status));
  print_short_hints(chapter, status.step);
  const std::vector<std::string> at = lab_todo_locations(chapter, status.step);
  for (const std::string& where : at)
    fmt::print("    {}\n", paint(Paint::kDim, "write it at " + where));
  fmt::print("  {}\n", paint(Paint::kDim, fmt::format("./dtw hint {} says more.", chapter.id)));
}

// The command that runs `test` of the lab in the AddressSanitizer build (the
// `asan` preset of the README), which names the line a crash comes from.
std::string sanitizer_command(const Context& context, const Chapter& chapter,
                              const std::string& test) {
  const fs::path program = fs::relative(chapter.lab_tests, context.build.build_dir);
  return fmt::format("cmake --preset asan && cmake --build --preset asan --target {} && "
                     "build-asan/{} --gtest_filter={}",
                     program.filename().string(), program.string(), test);
}

// A test program that stopped without its report. The tests GoogleTest saw
// pass ("[       OK ] ...") pass; the test it was running (its last
// "[ RUN      ]" line) fails with how the program ended, what to run to see
// where, and the program's last lines. Returns that test's name ("" when the
// program stopped before any test started).
std::string record_crash(const Context& context, const Chapter& chapter, const TestRun& run,
                         std::map<std::string, TestResult>& results) {
  static const std::string kRun = "[ RUN      ] ", kOk = "[       OK ] ";
  std::istringstream in(run.process.output);
  std::string running;
  std::vector<std::string> tail;  // the lines since the last "[ RUN      ]"
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(kRun)) {
      running = line.substr(kRun.size());
      tail.clear();
    } else if (line.starts_with(kOk)) {
      const std::string name = line.substr(kOk.size(), line.find(" (") - kOk.size());
      results[name] = {name, true, false, {}};
      running.clear();
    }
    tail.push_back(line);
  }
  if (running.empty()) return "";
  std::string text;
  if (run.process.timed_out) {
    text = fmt::format("the test program was stopped in this test: {}", run.process.describe());
  } else {
    text = fmt::format(
        "the test program crashed in this test: {}\n"
        "to see the line it crashed on, run the test in the AddressSanitizer build:\n"
        "{}",
        run.process.describe(), sanitizer_command(context, chapter, running));
  }
  const std::size_t first = tail.size() > kCrashTailLines ? tail.size() - kCrashTailLines : 0;
  text += "\nthe program's last output:";
  for (std::size_t i = first; i < tail.size(); ++i) text += "\n  " + tail[i];
  results[running] = {running, false, false, {text}};
  return running;
}

// Runs `names`, each test once: when the program crashes, the crashed test
// fails and the tests it did not reach run in a new program, so that every
// test of the step has a result. A program stopped at the time limit is not
// started again.
void run_tests(const Context& context, const Chapter& chapter, const fs::path& program,
               std::vector<std::string> names, std::map<std::string, TestResult>& results) {
  while (!names.empty()) {
    const TestRun run = run_test_program(program, names);
    for (const TestResult& r : run.tests) results[r.name] = r;
    if (run.reported) return;
    if (record_crash(context, chapter, run, results).empty() || run.process.timed_out) return;
    const std::size_t before = names.size();
    std::erase_if(names, [&](const std::string& name) { return results.count(name) > 0; });
    if (names.size() == before) return;  // the crash was in none of them: no progress to make
  }
}

}  // namespace

int check_command(const Context& context, const CheckOptions& options) {
  const Chapter& chapter = find_chapter(context.chapters, options.chapter);
  const std::string only = options.step.empty() ? "" : find_step(chapter, options.step);
  const bool own_program = !options.program.empty();
  const fs::path program = own_program ? fs::path(options.program) : chapter.lab_tests;
  if (program.empty()) {
    print_error("this build has no test programs: configure it with -DDTW_BUILD_TESTS=ON");
    return 1;
  }
  fmt::print("{}\n", paint(Paint::kBold, fmt::format("Chapter {} — {}", chapter.id, chapter.title)));
  if (!own_program && !build_lab(context, chapter)) return 1;
  if (!fs::exists(program)) {
    print_error(fmt::format("{} was not built", program.string()));
    return 1;
  }

  // What is known already: results of this very program.
  const fs::path cache_file = cache_path(context.build, chapter);
  CheckCache cache = own_program ? CheckCache{} : read_cache(cache_file);
  const std::string program_hash = hash_file(program);
  const bool same_program = cache.program_hash == program_hash;
  if (!same_program || !cache.has_plan) {
    cache.plan = load_plan(program);
    cache.has_plan = true;
  }
  if (!same_program || options.rerun) cache.results.clear();
  cache.program_hash = program_hash;
  cache.lab_hash = hash_lab(chapter);
  const TestPlan& plan = cache.plan;
  if (!plan.problems.empty()) {
    print_error("the tests of this chapter declare their steps wrongly (a bug of the chapter, "
                "not of your lab):");
    for (std::size_t i = 0; i < plan.problems.size() && i < 3; ++i)
      fmt::print(stderr, "  {}\n", plan.problems[i]);
  }

  const std::map<std::string, StepProgress> progress = step_progress(chapter);
  std::size_t width = 0;
  for (const std::string& s : plan.steps) width = std::max(width, s.size());

  // Step by step in the text's order: run what is not known, print the line.
  int from_cache = 0;
  std::vector<StepStatus> statuses;
  for (const std::string& step : plan.steps) {
    std::vector<std::string> names;
    bool cached = false;
    for (const PlannedTest& t : plan.tests) {
      if (t.own() != step || (!only.empty() && step != only)) continue;
      if (cache.results.count(t.name)) {
        cached = true;
        continue;
      }
      names.push_back(t.name);
    }
    if (!names.empty()) {
      run_tests(context, chapter, program, names, cache.results);
      if (!own_program) write_cache(cache_file, cache);
    } else if (cached) {
      ++from_cache;
    }
    statuses = classify_steps(plan, cache.results, progress);
    const StepStatus& s = *std::ranges::find(statuses, step, &StepStatus::step);
    // Out of the step's tests: a test without a result (not run, or after a
    // program that stopped at the time limit) is counted and named as such.
    std::string count = s.run == 0 ? "" : fmt::format("{}/{} tests pass", s.passed, s.tests);
    if (s.run > 0 && s.run < s.tests) count += fmt::format(" ({} not run)", s.tests - s.run);
    fmt::print("  {}  {}  {}\n", paint_padded(Paint::kBold, s.step, width),
               paint_padded(paint_for(s.state), state_label(s), 28), paint(Paint::kDim, count));
    std::fflush(stdout);
  }
  fmt::print("\n");

  const auto in_scope = [&](const StepStatus& s) { return only.empty() || s.step == only; };
  const auto first_fail = std::ranges::find_if(statuses, [&](const StepStatus& s) {
    return in_scope(s) && s.state == StepState::kFail;
  });
  const auto first_open = std::ranges::find_if(statuses, [&](const StepStatus& s) {
    return in_scope(s) && s.state != StepState::kPass && s.state != StepState::kUnchecked &&
           s.state != StepState::kNoTests;
  });
  const bool all_pass = std::ranges::all_of(statuses, [&](const StepStatus& s) {
    return !in_scope(s) || s.state == StepState::kPass;
  });
  if (first_fail != statuses.end()) {
    print_failure(chapter, *first_fail, options.verbose);
  } else if (first_open != statuses.end()) {
    print_next(chapter, *first_open);
  } else if (all_pass) {
    fmt::print("{}\n", paint(Paint::kGreen,
                             only.empty()
                                 ? fmt::format("Every step of chapter {} passes. Well done.", chapter.id)
                                 : fmt::format("Step {} passes.", only)));
  }
  if (from_cache > 0)
    fmt::print("{}\n", paint(Paint::kDim, fmt::format("({} step(s) from the last run: your lab has "
                                                      "not changed since; --rerun runs them again)",
                                                      from_cache)));
  return all_pass && plan.problems.empty() ? 0 : 1;
}

}  // namespace dtw::cli
