// dtw hint, dtw diff and dtw bench: commands that look at files rather than
// run chapter code.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "commands.h"
#include "hints.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {

int hint_command(const Context& context, const std::string& chapter_query,
                 const std::string& step_query) {
  const Chapter& chapter = find_chapter(context.chapters, chapter_query);
  const std::string only = step_query.empty() ? "" : find_step(chapter, step_query).id;
  const std::vector<Hint> hints = read_hints(chapter);
  fmt::print("{}\n",
             paint(Paint::kBold, fmt::format("Chapter {} — {}: hints", chapter.id, chapter.title)));
  for (const Step& step : chapter.steps) {
    if (!only.empty() && step.id != only) continue;
    fmt::print("\n{}\n", paint(Paint::kBold, "Step " + step.id));
    int count = 0;
    for (const Hint& h : hints) {
      if (h.step != step.id) continue;
      fmt::print("  {} {}\n", paint(Paint::kCyan, "-"), h.text);
      ++count;
    }
    if (count == 0) fmt::print("  {}\n", paint(Paint::kDim, "(no @lab marker names this step)"));
    const std::vector<std::string> at = lab_todo_locations(chapter, step.id);
    if (at.empty())
      fmt::print("  {}\n", paint(Paint::kGreen, "no DTW_TODO left in the lab for this step"));
    for (const std::string& where : at)
      fmt::print("  {} {}\n", paint(Paint::kDim, "write it at"), where);
  }
  fmt::print("\n{}\n",
             paint(Paint::kDim,
                   fmt::format("Stuck after trying? dtw diff {} shows the solution.", chapter.id)));
  return 0;
}

int diff_command(const Context& context, const std::string& chapter_query) {
  const Chapter& chapter = find_chapter(context.chapters, chapter_query);
  fmt::print("{}\n",
             paint(Paint::kYellow, fmt::format("Warning: this shows the solution of chapter {}; "
                                               "lines with - are yours, + the reference.",
                                               chapter.id)));
  const std::string lab = "labs/" + chapter.name, solution = "solutions/" + chapter.name;
  // demos.cpp exists only in solutions/ (demos always run the solution).
  std::vector<std::string> argv{"diff", "-ru", "--exclude=demos.cpp", lab, solution};
  if (color_enabled()) argv.insert(argv.begin() + 2, "--color=always");
  const ProcessResult diff = run_process(argv, {.working_dir = chapter.source_dir.string()});
  // diff: 0 same, 1 different, 2 trouble.
  if (diff.exit_code == 0) fmt::print("The lab is identical to the solution.\n");
  return diff.exit_code == 2 || diff.signal != 0 ? 2 : 0;
}

int bench_command(const Context& context, const std::vector<std::string>& args) {
  const fs::path dir = context.build.build_dir / "bench";
  std::vector<std::string> names;
  if (fs::is_directory(dir))
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      const std::string file = e.path().filename().string();
      if (e.is_regular_file() && file.starts_with("dtw_bench_") &&
          access(e.path().c_str(), X_OK) == 0)
        names.push_back(file.substr(std::strlen("dtw_bench_")));
    }
  std::ranges::sort(names);
  const std::string available =
      names.empty() ? "none are built in " + dir.string() + " yet (build the dtw_bench_* targets)"
                    : fmt::format("built ones: {}", fmt::join(names, ", "));
  if (args.empty()) throw UsageError("dtw bench needs a benchmark name; " + available);
  const fs::path program = dir / ("dtw_bench_" + args[0]);
  if (!fs::exists(program))
    throw UsageError(fmt::format("no benchmark '{}'; {}", args[0], available));
  std::vector<std::string> argv{program.string()};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  exec_program(argv);
  print_error(fmt::format("cannot run {}: {}", program.string(), std::strerror(errno)));
  return 1;
}

}  // namespace dtw::cli
