// dtw hint, dtw diff and dtw bench: commands that look at files rather than
// run chapter code.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "check_cache.h"
#include "commands.h"
#include "exit_codes.h"
#include "hints.h"
#include "lab_results.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {

namespace {

// The step `dtw hint NN` is about when none is named: the one `dtw check`
// would name (first failure, else the first open step), as far as the last
// check knows; without one, the first step whose code is still DTW_TODO.
// Nothing when the last check found every step passing, or when no check
// knows of a failure and the lab has no DTW_TODO left.
std::optional<std::string> current_step(const Context& context, const Chapter& chapter,
                                        bool& all_pass) {
  const CheckCache cache = read_cache(cache_path(context.build, chapter));
  const std::map<std::string, StepProgress> progress = step_progress(chapter);
  all_pass = false;
  if (cache.has_plan && cache.lab_hash == hash_lab(chapter)) {
    const std::vector<StepStatus> statuses = classify_steps(cache.plan, cache.results, progress);
    for (const StepStatus& s : statuses)
      if (s.state == StepState::kFail) return s.step;
    for (const StepStatus& s : statuses)
      if (s.state != StepState::kPass && s.state != StepState::kNoTests) return s.step;
    all_pass = true;
    return std::nullopt;
  }
  for (const std::string& step : chapter.steps)
    if (const auto p = progress.find(step); p != progress.end() && p->second.todo > 0) return step;
  return std::nullopt;
}

fs::path hint_state_path(const Context& context) {
  return context.build.build_dir / ".dtw-check" / "hints.json";
}

}  // namespace

int hint_command(const Context& context, const std::string& chapter_query,
                 const std::string& step_query) {
  const Chapter& chapter = find_chapter(context.chapters, chapter_query);
  bool all_pass = false;
  const std::optional<std::string> current =
      step_query.empty() ? current_step(context, chapter, all_pass) : find_step(chapter, step_query);
  if (!current) {
    fmt::print("{}\n", all_pass ? paint(Paint::kGreen,
                                        fmt::format("Every step of chapter {} passes: there is no "
                                                    "step to hint at.",
                                                    chapter.id))
                                : fmt::format("Your lab of chapter {} has no DTW_TODO left; "
                                              "./dtw check {} says whether every step passes.",
                                              chapter.id, chapter.id));
    fmt::print("{}\n", paint(Paint::kDim,
                             fmt::format("./dtw hint {} {}.K still shows the hints of step {}.K "
                                         "(steps {}).",
                                         chapter.id, chapter.id, chapter.id,
                                         fmt::join(chapter.steps, ", "))));
    return 0;
  }
  const std::string& step = *current;
  std::vector<Hint> hints;
  for (const Hint& h : read_hints(chapter))
    if (h.step == step) hints.push_back(h);
  std::size_t levels = 0;
  for (const Hint& h : hints) levels = std::max(levels, h.levels.size());

  // Each call on the same step shows one level more, up to the last.
  nlohmann::json state = nlohmann::json::object();
  if (std::ifstream in(hint_state_path(context)); in) {
    try {
      state = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      state = nlohmann::json::object();
    }
  }
  const std::string key = chapter.id + "/" + step;
  const std::size_t shown = std::min<std::size_t>(state.value(key, 0) + 1, levels);
  state[key] = shown;
  std::error_code error;
  fs::create_directories(hint_state_path(context).parent_path(), error);
  std::ofstream(hint_state_path(context)) << state.dump(1) << "\n";

  fmt::print("{}\n", paint(Paint::kBold, fmt::format("Step {} (chapter {} — {})", step, chapter.id,
                                                     chapter.title)));
  for (const Hint& h : hints) {
    fmt::print("\n  {} {}\n", paint(Paint::kCyan, "-"), h.text);
    for (std::size_t level = 0; level < shown && level < h.levels.size(); ++level)
      fmt::print("    {}\n", wrap(h.levels[level], 74, "    "));
    const std::string lab = "labs/" + chapter.name + "/" + h.file;
    fmt::print("    {}\n", paint(Paint::kDim, "in " + lab));
  }
  const std::vector<std::string> at = lab_todo_locations(chapter, step);
  for (const std::string& where : at)
    fmt::print("  {} {}\n", paint(Paint::kDim, "still a DTW_TODO at"), where);
  fmt::print("\n");
  if (levels == 0)
    fmt::print("{}\n", paint(Paint::kDim, "This step has no more detailed hint."));
  else if (shown < levels)
    fmt::print("{}\n", paint(Paint::kDim, fmt::format("Hint level {} of {}: ./dtw hint {} {} "
                                                      "again shows more.",
                                                      shown, levels, chapter.id, step)));
  else
    fmt::print("{}\n",
               paint(Paint::kDim,
                     fmt::format("That is every hint for step {}. Stuck after trying? ./dtw diff {} "
                                 "shows the solution.",
                                 step, chapter.id)));
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
  std::vector<std::string> argv{"diff", "-ru", "--exclude=demos.cpp", "--exclude=pitfalls.cpp", lab, solution};
  if (color_enabled()) argv.insert(argv.begin() + 2, "--color=always");
  const ProcessResult diff = run_process(argv, {.working_dir = chapter.source_dir.string()});
  // diff: 0 same, 1 different, 2 trouble.
  if (diff.exit_code == 0) fmt::print("The lab is identical to the solution.\n");
  return diff.exit_code == 2 || diff.signal != 0 ? 2 : 0;
}

namespace {
// The benchmark names of the executables in `dir` called PREFIX<name>, sorted.
std::vector<std::string> benches_named(const fs::path& dir, std::string_view prefix) {
  std::vector<std::string> names;
  if (fs::is_directory(dir))
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      const std::string file = e.path().filename().string();
      if (e.is_regular_file() && file.starts_with(prefix) && access(e.path().c_str(), X_OK) == 0)
        names.push_back(file.substr(prefix.size()));
    }
  std::ranges::sort(names);
  return names;
}
}  // namespace

int bench_command(const Context& context, const std::vector<std::string>& args) {
  const fs::path dir = context.build.build_dir / "bench";
  const std::vector<std::string> names = benches_named(dir, "dtw_bench_");
  const std::string available =
      names.empty() ? "none are built in " + dir.string() + " yet (build the dtw_bench_* targets)"
                    : fmt::format("built ones: {}", fmt::join(names, ", "));
  if (args.empty()) throw UsageError("dtw bench needs a benchmark name; " + available);
  fs::path program = dir / ("dtw_bench_" + args[0]);
  if (!fs::exists(program))
    throw UsageError(fmt::format("no benchmark '{}'; {}", args[0], available));
  // --lab: the same report timing the learner's lab, a program of its own
  // (dtw_lab_bench_NAME) where the benchmark has one.
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const auto lab = std::ranges::find(rest, std::string("--lab"));
  if (lab != rest.end()) {
    rest.erase(lab);
    program = dir / ("dtw_lab_bench_" + args[0]);
    if (!fs::exists(program))
      throw UsageError(fmt::format("dtw bench {} has no --lab: it times no single chapter's lab "
                                   "(benchmarks that time your lab: {})",
                                   args[0], fmt::join(benches_named(dir, "dtw_lab_bench_"), ", ")));
  }
  std::vector<std::string> argv{program.string()};
  argv.insert(argv.end(), rest.begin(), rest.end());
  exec_program(argv);
  print_error(fmt::format("cannot run {}: {}", program.string(), std::strerror(errno)));
  return kExitRunFailed;
}

}  // namespace dtw::cli
