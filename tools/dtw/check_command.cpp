// dtw check NN: rebuild the chapter's lab, run its tests, and say per step
// where the learner stands; for the first real failure, what was expected,
// what came back, and the step's hint.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "commands.h"
#include "hints.h"
#include "lab_results.h"
#include "style.h"

namespace dtw::cli {
namespace {

Paint paint_for(StepState state) {
  switch (state) {
    case StepState::kPass: return Paint::kGreen;
    case StepState::kFail: return Paint::kRed;
    case StepState::kWaiting: return Paint::kYellow;
    default: return Paint::kDim;
  }
}

// Prints the hint of `step` and where its DTW_TODOs are in the lab.
void print_hint(const Chapter& chapter, const std::string& step) {
  for (const Hint& h : read_hints(chapter))
    if (h.step == step) fmt::print("  {} {}\n", paint(Paint::kCyan, "hint " + step + ":"), h.text);
  for (const std::string& at : lab_todo_locations(chapter, step))
    fmt::print("    still a DTW_TODO at {}\n", at);
}

// The first failure of `test`, indented, its file:line shown from the
// repository root. For DTW_EXPECT_SAME only the location and the mismatch line
// ("rank 2, index 17: expected 3.5, got 0") are shown, not GoogleTest's
// "Value of: dtw_mismatch_.empty()" wrapping.
void print_failure(const Chapter& chapter, const TestResult& test) {
  constexpr std::size_t kMaxLines = 12;
  const std::string root = chapter.source_dir.string() + "/";
  const std::string& failure = test.failures.front();
  const bool same_check = failure.find("dtw_mismatch_") != std::string::npos;
  std::istringstream lines(failure);
  std::string line;
  for (std::size_t printed = 0, number = 0; std::getline(lines, line); ++number) {
    if (line.starts_with(root)) line.erase(0, root.size());
    const bool mismatch = line.starts_with("rank ") && line.find("expected") != std::string::npos;
    if (same_check && number > 0 && !mismatch) continue;
    if (printed++ == kMaxLines) {
      fmt::print("    {}\n", paint(Paint::kDim, "..."));
      break;
    }
    fmt::print("    {}\n", mismatch ? paint(Paint::kBold, line) : line);
  }
  if (test.failures.size() > 1)
    fmt::print("    {}\n", paint(Paint::kDim, fmt::format("(and {} more failure(s) in this test)",
                                                          test.failures.size() - 1)));
}

}  // namespace

int check_command(const Context& context, const CheckOptions& options) {
  const Chapter& chapter = find_chapter(context.chapters, options.chapter);
  if (chapter.lab_tests.empty()) {
    print_error("this build has no test programs: configure it with -DDTW_BUILD_TESTS=ON");
    return 1;
  }
  fmt::print("{} {} {}: {}\n", paint(Paint::kBold, "Chapter"), paint(Paint::kBold, chapter.id),
             paint(Paint::kBold, chapter.title), paint(Paint::kDim, "building the lab"));
  const ProcessResult build =
      run_process({context.build.cmake.string(), "--build", context.build.build_dir.string(),
                   "--target", chapter.lab_target},
                  {});
  if (!build.ok()) {
    print_error(fmt::format(
        "the lab of chapter {} does not compile ({}); the compiler's messages are above",
        chapter.id, build.describe()));
    return 1;
  }
  if (!fs::exists(chapter.lab_tests)) {
    print_error(fmt::format("{} was not built", chapter.lab_target));
    return 1;
  }

  std::vector<std::pair<std::string, std::string>> env;
  if (options.ranks > 0) env.emplace_back("DTW_TEST_RANKS", std::to_string(options.ranks));
  if (!options.backend.empty()) env.emplace_back("DTW_TEST_BACKEND", options.backend);
  fmt::print("{}\n", paint(Paint::kDim, "running the lab tests"));
  const TestRun run = run_test_program(chapter.lab_tests, env);
  if (!run.reported) {
    print_error(fmt::format("{} stopped with {} before writing its report; its last output:",
                            chapter.lab_target, run.process.describe()));
    const std::string& out = run.process.output;
    fmt::print(stderr, "{}\n", out.size() > 4000 ? "..." + out.substr(out.size() - 4000) : out);
    return 1;
  }

  const std::vector<StepStatus> statuses = classify_steps(chapter, run);
  fmt::print("\n");
  const StepStatus* first_fail = nullptr;
  const StepStatus* first_open = nullptr;
  for (const StepStatus& s : statuses) {
    fmt::print("  {}  {}  {}/{} tests pass  {}\n", paint(Paint::kBold, s.step->id),
               paint_padded(paint_for(s.state), state_label(s), 18), s.passed, s.tests,
               paint(Paint::kDim, fmt::format("{}", fmt::join(s.step->suites, ", "))));
    if (s.state == StepState::kFail && !first_fail) first_fail = &s;
    if (s.state != StepState::kPass && !first_open) first_open = &s;
  }
  const bool all_pass = std::ranges::all_of(
      statuses, [](const StepStatus& s) { return s.state == StepState::kPass; });
  fmt::print("\n");
  if (all_pass) {
    fmt::print("{}\n",
               paint(Paint::kGreen,
                     fmt::format("Every step of chapter {} passes. Well done.", chapter.id)));
    return 0;
  }
  if (first_fail) {
    fmt::print("{} {} {}\n", paint(Paint::kRed, "First failure:"),
               first_fail->first_failure->full_name(),
               paint(Paint::kDim, "(step " + first_fail->step->id + ")"));
    print_failure(chapter, *first_fail->first_failure);
    print_hint(chapter, first_fail->step->id);
  } else if (first_open && first_open->state == StepState::kNoTests) {
    fmt::print("Step {} has no tests: its suites ({}) are not in {}.\n", first_open->step->id,
               fmt::join(first_open->step->suites, ", "), chapter.lab_target);
  } else if (first_open) {
    const std::string step =
        first_open->state == StepState::kWaiting ? first_open->waiting_on : first_open->step->id;
    fmt::print("Next: step {}.\n", paint(Paint::kBold, step));
    print_hint(chapter, step);
  }
  return 1;
}

}  // namespace dtw::cli
