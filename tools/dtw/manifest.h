#pragma once
// Where the dtw program finds its build, and the chapter manifests that
// dtw_add_chapter writes there at configure time (build/chapters/NN.json).
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dtw::cli {

namespace fs = std::filesystem;

/// A user mistake (unknown chapter, step, demo...): exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The build this program belongs to, found from its own path.
struct BuildInfo {
  fs::path build_dir;   // where dtw_build.json lies
  fs::path source_dir;  // the repository root
  fs::path cmake;       // the cmake that configured the build
};

/// Walks up from /proc/self/exe to the folder holding dtw_build.json.
BuildInfo locate_build();

struct Chapter {
  std::string id;     // "00"
  std::string name;   // "00-ranks-and-messages"
  std::string title;  // "Ranks and messages"
  fs::path source_dir;
  std::string lab_target;  // "ch00_lab_tests"
  fs::path lab_tests;      // built lab test program (may not exist yet)
  fs::path solution_tests;
  std::vector<std::string> steps;  // "00.1", ... in the order of the chapter text
  std::vector<std::pair<std::string, fs::path>> planted;  // step -> planted-bug program
  fs::path lab_run;  // the demos with the lab (dtw run --lab); empty without demos

  fs::path lab_dir() const { return source_dir / "labs" / name; }
  fs::path solution_dir() const { return source_dir / "solutions" / name; }
};

/// Every chapter manifest in the build, ordered by id.
std::vector<Chapter> load_chapters(const BuildInfo& build);

/// The chapter `query` names ("0", "00", "00-ranks-and-messages"); throws
/// UsageError listing the chapters when there is none.
const Chapter& find_chapter(const std::vector<Chapter>& chapters, const std::string& query);

/// The step `query` names within `chapter` ("00.1" or just "1"); throws UsageError.
const std::string& find_step(const Chapter& chapter, const std::string& query);

/// Position of `step` in the chapter text's order, or -1.
int step_order(const Chapter& chapter, const std::string& step);

}  // namespace dtw::cli
