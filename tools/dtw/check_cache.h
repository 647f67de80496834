#pragma once
// What `dtw check` remembers between runs, per chapter, in the build folder
// (.dtw-check/NN.json): the test plan and every test's last result, valid
// while the lab test program is byte for byte the one that produced them.
// `dtw list` reads it without building or running anything: it compares the
// lab files' content with what they were when the results were taken.
#include <map>
#include <string>

#include "lab_results.h"
#include "manifest.h"

namespace dtw::cli {

struct CheckCache {
  std::string lab_hash;      // content of labs/NN-x when the results were taken
  std::string program_hash;  // content of the lab test program that ran them
  bool has_plan = false;
  TestPlan plan;
  std::map<std::string, TestResult> results;  // by test name
};

/// Where chapter `chapter`'s cache lives in `build`.
fs::path cache_path(const BuildInfo& build, const Chapter& chapter);
/// The cache at `path`, or an empty one when there is none (or it is unreadable).
CheckCache read_cache(const fs::path& path);
/// Writes `cache` to `path` (atomically: a write to a temporary, then a rename).
void write_cache(const fs::path& path, const CheckCache& cache);

/// A 64-bit FNV-1a hash of a file's bytes, in hex; "" when it cannot be read.
std::string hash_file(const fs::path& path);
/// The hash of every file under labs/NN-x (names and contents).
std::string hash_lab(const Chapter& chapter);

}  // namespace dtw::cli
