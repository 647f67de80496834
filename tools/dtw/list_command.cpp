// dtw list: every chapter, its steps and how far the learner's lab has come.
#include <fmt/core.h>

#include "commands.h"
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

}  // namespace

int list_command(const Context& context) {
  if (context.chapters.empty()) {
    fmt::print("No chapters are registered (chapters/CMakeLists.txt).\n");
    return 0;
  }
  std::size_t title_width = 0;
  for (const Chapter& c : context.chapters) title_width = std::max(title_width, c.title.size());

  for (const Chapter& c : context.chapters) {
    const std::string head = fmt::format("{}  {}", paint(Paint::kBold, c.id),
                                         paint_padded(Paint::kBold, c.title, title_width));
    if (c.lab_tests.empty() || !fs::exists(c.lab_tests)) {
      std::string steps;
      for (const Step& s : c.steps) steps += " " + s.id;
      fmt::print("{}  {}  steps{}  {}\n", head,
                 paint_padded(Paint::kDim, fmt::format("-/{}", c.steps.size()), 5), steps,
                 paint(Paint::kYellow, fmt::format("not built (dtw check {} builds it)", c.id)));
      continue;
    }
    // The lab's own tests are the only record of progress: run them, quietly.
    const TestRun run = run_test_program(c.lab_tests, {});
    if (!run.reported) {
      fmt::print(
          "{}  {}  {}\n", head, paint_padded(Paint::kRed, fmt::format("?/{}", c.steps.size()), 5),
          paint(Paint::kRed, fmt::format("the lab tests stopped with {} (dtw check {} shows why)",
                                         run.process.describe(), c.id)));
      continue;
    }
    const std::vector<StepStatus> statuses = classify_steps(c, run);
    int done = 0;
    std::string steps;
    for (const StepStatus& s : statuses) {
      done += s.state == StepState::kPass ? 1 : 0;
      steps += fmt::format("  {} {}", s.step->id, paint(paint_for(s.state), state_label(s)));
    }
    const Paint progress = done == static_cast<int>(statuses.size()) ? Paint::kGreen : Paint::kBold;
    fmt::print("{}  {}{}\n", head,
               paint_padded(progress, fmt::format("{}/{}", done, statuses.size()), 5), steps);
  }
  fmt::print(
      "\n{}\n",
      paint(Paint::kDim, "dtw check NN runs a chapter's lab tests; dtw hint NN shows its hints."));
  return 0;
}

}  // namespace dtw::cli
