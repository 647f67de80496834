#include "manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace dtw::cli {
namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{} is not valid JSON: {}", path.string(), e.what()));
  }
}

std::string chapter_list(const std::vector<Chapter>& chapters) {
  if (chapters.empty()) return "none are registered in chapters/CMakeLists.txt";
  std::string out;
  for (const Chapter& c : chapters) out += fmt::format("\n  {}  {}", c.id, c.title);
  return "the chapters are:" + out;
}

}  // namespace

BuildInfo locate_build() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("cannot find this program's path (/proc/self/exe)");
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const fs::path info = dir / "dtw_build.json";
    if (fs::exists(info)) {
      const nlohmann::json j = read_json(info);
      return {dir, j.at("source_dir").get<std::string>(), j.at("cmake").get<std::string>()};
    }
    if (dir == dir.root_path()) break;
  }
  throw std::runtime_error(fmt::format(
      "{} is not inside a dtw build (no dtw_build.json above it); run it from the build folder",
      exe.string()));
}

std::vector<Chapter> load_chapters(const BuildInfo& build) {
  std::vector<Chapter> chapters;
  const fs::path dir = build.build_dir / "chapters";
  if (!fs::is_directory(dir)) return chapters;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const nlohmann::json j = read_json(entry.path());
    Chapter c;
    c.id = j.at("id").get<std::string>();
    c.name = j.at("name").get<std::string>();
    c.title = j.at("title").get<std::string>();
    c.source_dir = j.at("source_dir").get<std::string>();
    c.lab_target = j.at("lab_target").get<std::string>();
    c.lab_tests = j.value("lab_tests", std::string());
    c.solution_tests = j.value("solution_tests", std::string());
    c.steps = j.at("steps").get<std::vector<std::string>>();
    c.lab_run = j.value("lab_run", std::string());
    if (j.contains("planted"))
      for (const auto& [step, program] : j.at("planted").items())
        c.planted.emplace_back(step, program.get<std::string>());
    chapters.push_back(std::move(c));
  }
  std::ranges::sort(chapters, {}, &Chapter::id);
  return chapters;
}

const Chapter& find_chapter(const std::vector<Chapter>& chapters, const std::string& query) {
  for (const Chapter& c : chapters) {
    const bool by_number =
        !query.empty() && query.size() <= 2 &&
        std::ranges::all_of(query, [](char ch) { return ch >= '0' && ch <= '9'; }) &&
        std::stoi(query) == std::stoi(c.id);
    if (by_number || query == c.id || query == c.name) return c;
  }
  throw UsageError(fmt::format("no chapter '{}'; {}", query, chapter_list(chapters)));
}

const std::string& find_step(const Chapter& chapter, const std::string& query) {
  for (const std::string& s : chapter.steps)
    if (query == s || chapter.id + "." + query == s) return s;
  throw UsageError(fmt::format("chapter {} has no step '{}'; its steps are {}", chapter.id, query,
                               fmt::join(chapter.steps, " ")));
}

int step_order(const Chapter& chapter, const std::string& step) {
  const auto it = std::ranges::find(chapter.steps, step);
  return it == chapter.steps.end() ? -1 : static_cast<int>(it - chapter.steps.begin());
}

}  // namespace dtw::cli
