#include "hints.h"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <regex>

namespace dtw::cli {
namespace {

// Source files of `dir`, recursively, sorted so output order is stable.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::ranges::sort(files);
  return files;
}

std::string relative(const Chapter& chapter, const fs::path& file, int line) {
  return fmt::format("{}:{}", fs::relative(file, chapter.source_dir).string(), line);
}

}  // namespace

std::vector<Hint> read_hints(const Chapter& chapter) {
  // The grammar tools/gen-labs accepts.
  static const std::regex kMarker(R"(^[ \t]*// @lab (\d\d\.\d+):[ \t]*(.*?)[ \t]*$)");
  static const std::regex kLevel(R"(^[ \t]*// @hint (\d+):[ \t]*(.*?)[ \t]*$)");
  std::vector<Hint> hints;
  for (const fs::path& file : files_in(chapter.solution_dir())) {
    std::ifstream in(file);
    std::string line;
    bool in_hints = false;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (std::regex_match(line, m, kMarker)) {
        hints.push_back({m[1], m[2], {}, fs::relative(file, chapter.solution_dir()).string(),
                         relative(chapter, file, number)});
        in_hints = true;
      } else if (in_hints && std::regex_match(line, m, kLevel)) {
        std::vector<std::string>& levels = hints.back().levels;
        const std::size_t level = std::stoul(m[1]);
        if (levels.size() < level) levels.resize(level);
        std::string& text = levels[level - 1];
        if (!text.empty()) text += ' ';
        text += m[2].str();
      } else {
        in_hints = false;
      }
    }
  }
  return hints;
}

std::vector<std::string> lab_todo_locations(const Chapter& chapter, const std::string& step) {
  const std::string needle = "DTW_TODO(\"" + step + ":";
  std::vector<std::string> at;
  for (const fs::path& file : files_in(chapter.lab_dir())) {
    std::ifstream in(file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number)
      if (line.find(needle) != std::string::npos) at.push_back(relative(chapter, file, number));
  }
  return at;
}

std::map<std::string, StepProgress> step_progress(const Chapter& chapter) {
  std::map<std::string, StepProgress> out;
  for (const Hint& h : read_hints(chapter)) ++out[h.step].regions;
  static const std::regex kTodo(R"(DTW_TODO\("(\d\d\.\d+):)");
  for (const fs::path& file : files_in(chapter.lab_dir())) {
    std::ifstream in(file);
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, kTodo)) ++out[m[1]].todo;
  }
  return out;
}

std::vector<std::string> step_files(const Chapter& chapter, const std::string& step) {
  std::vector<std::string> files;
  for (const Hint& h : read_hints(chapter)) {
    const std::string lab = "labs/" + chapter.name + "/" + h.file;
    if (h.step == step && std::ranges::find(files, lab) == files.end()) files.push_back(lab);
  }
  return files;
}

}  // namespace dtw::cli
