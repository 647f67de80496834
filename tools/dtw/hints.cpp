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
  // The same grammar tools/gen-labs accepts.
  static const std::regex kMarker(R"(^[ \t]*// @lab (\d\d\.\d+):[ \t]*(.*?)[ \t]*$)");
  std::vector<Hint> hints;
  for (const fs::path& file : files_in(chapter.solution_dir())) {
    std::ifstream in(file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (std::regex_match(line, m, kMarker))
        hints.push_back({m[1], m[2], relative(chapter, file, number)});
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

}  // namespace dtw::cli
