#include "manifest.h"

#include <fmt/core.h>

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
    for (const nlohmann::json& s : j.at("steps"))
      c.steps.push_back(
          {s.at("id").get<std::string>(), s.at("suites").get<std::vector<std::string>>()});
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

const Step& find_step(const Chapter& chapter, const std::string& query) {
  for (const Step& s : chapter.steps)
    if (query == s.id || chapter.id + "." + query == s.id) return s;
  std::string ids;
  for (const Step& s : chapter.steps) ids += " " + s.id;
  throw UsageError(
      fmt::format("chapter {} has no step '{}'; its steps are{}", chapter.id, query, ids));
}

bool suite_matches(const std::string& suite, const std::string& wanted) {
  if (suite == wanted) return true;
  // Value- and type-parameterised suites: "Instance/Suite" and "Suite/0".
  const auto slash = [&](std::size_t pos) { return pos < suite.size() && suite[pos] == '/'; };
  if (suite.starts_with(wanted) && slash(wanted.size())) return true;
  const std::size_t at = suite.find("/" + wanted);
  return at != std::string::npos &&
         (at + 1 + wanted.size() == suite.size() || slash(at + 1 + wanted.size()));
}

}  // namespace dtw::cli
