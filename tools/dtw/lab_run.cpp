#include "lab_run.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "commands.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {

std::vector<LabRunCommand>& lab_run_commands() {
  static std::vector<LabRunCommand> commands;
  return commands;
}

void exec_lab_run(const std::string& chapter_id, const std::vector<std::string>& args) {
  const Context context = load_context();
  const Chapter& chapter = find_chapter(context.chapters, chapter_id);
  if (chapter.lab_run.empty() || !std::filesystem::exists(chapter.lab_run))
    throw UsageError(fmt::format("the lab-run program of chapter {} is not built ({}); ./dtw "
                                 "builds it",
                                 chapter.id, chapter.lab_run.string()));
  std::vector<std::string> argv{chapter.lab_run.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  exec_program(argv);
  throw std::runtime_error(
      fmt::format("cannot run {}: {}", chapter.lab_run.string(), std::strerror(errno)));
}

std::optional<NotWritten> not_written(const std::string& message) {
  static const std::regex kStep(
      R"((?:^|: )(\d\d\.\d+): (.*?)(?: \(NotImplemented\))?(?: \[[^\]]*\])?$)");
  const std::string first_line = message.substr(0, message.find('\n'));
  std::smatch m;
  if (!std::regex_search(first_line, m, kStep)) return std::nullopt;
  return NotWritten{m[1].str(), m[2].str()};
}

void print_not_written(const NotWritten& w, const std::string& chapter, const std::string& who,
                       const std::string& instead) {
  fmt::print("\n{} your lab has not written step {} yet ({}), and {} needed it.\n  ./dtw check {} "
             "{} tests it; {}.\n",
             paint(Paint::kYellow, "Not written yet:"), w.step, w.hint, who, chapter, w.step,
             instead);
}

}  // namespace dtw::cli
