// dtw list: every chapter, its steps and how far the learner's lab has come,
// from what the last `dtw check` found (it builds and runs nothing, so it
// answers at once). Steps whose regions are all still DTW_TODO are "not
// started" without any check; results of a lab that changed since its last
// check are not shown as if they still held.
#include <fmt/format.h>

#include <algorithm>

#include "check_cache.h"
#include "commands.h"
#include "hints.h"
#include "lab_results.h"
#include "style.h"

namespace dtw::cli {
namespace {

constexpr int kColumns = 3;

Paint paint_for(StepState state) {
  switch (state) {
    case StepState::kPass: return Paint::kGreen;
    case StepState::kFail: return Paint::kRed;
    case StepState::kWaiting:
    case StepState::kInProgress: return Paint::kYellow;
    default: return Paint::kDim;
  }
}

// A label short enough for a column of the list.
std::string short_label(const StepStatus& s) {
  switch (s.state) {
    case StepState::kInProgress:
      return fmt::format("started ({}/{})", s.progress.regions - s.progress.todo, s.progress.regions);
    case StepState::kUnchecked:
      return s.progress.regions > 0 && s.progress.todo == s.progress.regions ? "not started"
                                                                             : "not checked";
    // The earliest of the steps it waits on (the one to write first) and how
    // many more: the column is narrow, and `dtw check` names them all.
    case StepState::kWaiting:
      return s.waiting_on.size() == 1
                 ? "waiting on " + s.waiting_on.front()
                 : fmt::format("waiting on {} +{}", s.waiting_on.front(), s.waiting_on.size() - 1);
    default: return state_label(s);
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
    const CheckCache cache = read_cache(cache_path(context.build, c));
    const bool current = cache.has_plan && cache.lab_hash == hash_lab(c);
    const std::map<std::string, StepProgress> progress = step_progress(c);
    // Without a current check, the plan still says which steps there are.
    TestPlan plan = cache.has_plan ? cache.plan : TestPlan{c.steps, {}, {}};
    std::vector<StepStatus> statuses =
        classify_steps(plan, current ? cache.results : std::map<std::string, TestResult>{}, progress);
    std::size_t width = 0, label_width = 16;
    int done = 0;
    for (StepStatus& s : statuses) {
      width = std::max(width, s.step.size());
      done += s.state == StepState::kPass ? 1 : 0;
      if (!current || s.state == StepState::kNoTests) s.state = StepState::kUnchecked;
      label_width = std::max(label_width, short_label(s).size());
    }
    const Paint total = done == static_cast<int>(statuses.size()) ? Paint::kGreen : Paint::kBold;
    std::string note;
    if (!cache.has_plan)
      note = fmt::format("not checked yet: ./dtw check {}", c.id);
    else if (!current)
      note = fmt::format("your lab changed since the last check: ./dtw check {}", c.id);
    fmt::print("{}  {}  {}  {}\n", paint(Paint::kBold, c.id),
               paint_padded(Paint::kBold, c.title, title_width),
               paint_padded(total, fmt::format("{}/{} steps pass", done, statuses.size()), 17),
               paint(Paint::kYellow, note));
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      const StepStatus& s = statuses[i];
      fmt::print("{}{}  {}", i % kColumns == 0 ? "      " : "  ", paint_padded(Paint::kBold, s.step, width),
                 paint_padded(paint_for(s.state), short_label(s), label_width));
      if (i % kColumns == kColumns - 1 || i + 1 == statuses.size()) fmt::print("\n");
    }
  }
  fmt::print("\n{}\n",
             paint(Paint::kDim,
                   "./dtw check NN runs a chapter's lab tests; ./dtw hint NN gives the next hint."));
  return 0;
}

}  // namespace dtw::cli
