#include "check_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace dtw::cli {
namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

void fnv(std::uint64_t& h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
}

// Adds the bytes of `path` to `h`; false when it cannot be read.
bool fnv_file(std::uint64_t& h, const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    fnv(h, buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  return true;
}

}  // namespace

fs::path cache_path(const BuildInfo& build, const Chapter& chapter) {
  return build.build_dir / ".dtw-check" / (chapter.id + ".json");
}

CheckCache read_cache(const fs::path& path) {
  CheckCache cache;
  std::ifstream in(path);
  if (!in) return cache;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    cache.lab_hash = j.at("lab_hash").get<std::string>();
    cache.program_hash = j.at("program_hash").get<std::string>();
    if (j.contains("plan")) {
      cache.plan = plan_from_json(j.at("plan"));
      cache.has_plan = true;
    }
    for (const nlohmann::json& r : j.at("results")) {
      TestResult t = result_from_json(r);
      cache.results.emplace(t.name, std::move(t));
    }
  } catch (const nlohmann::json::exception&) {
    return {};  // an old or damaged cache is only a cache
  }
  return cache;
}

void write_cache(const fs::path& path, const CheckCache& cache) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& [name, result] : cache.results) results.push_back(result_to_json(result));
  nlohmann::json j = {{"lab_hash", cache.lab_hash},
                      {"program_hash", cache.program_hash},
                      {"results", results}};
  if (cache.has_plan) j["plan"] = plan_to_json(cache.plan);
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  const fs::path tmp = path.string() + fmt::format(".{}.tmp", getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;  // a cache that cannot be written only costs time
    // A test's output is not always valid UTF-8 (a crash can cut a character
    // in two); such bytes become U+FFFD instead of stopping the check.
    out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  fs::rename(tmp, path, error);
}

std::string hash_file(const fs::path& path) {
  std::uint64_t h = kFnvOffset;
  return fnv_file(h, path) ? fmt::format("{:016x}", h) : "";
}

std::string hash_lab(const Chapter& chapter) {
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(chapter.lab_dir(), error), end; !error && it != end;
       it.increment(error))
    if (it->is_regular_file()) files.push_back(it->path());
  std::ranges::sort(files);
  std::uint64_t h = kFnvOffset;
  for (const fs::path& f : files) {
    const std::string name = fs::relative(f, chapter.lab_dir()).string();
    fnv(h, name.c_str(), name.size() + 1);  // with the terminating NUL as a separator
    fnv_file(h, f);
  }
  return fmt::format("{:016x}", h);
}

}  // namespace dtw::cli
