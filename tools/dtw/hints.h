#pragma once
// The hints of a chapter's steps, read from the @lab regions of its solution,
// and where each step stands in the lab (which regions are still DTW_TODO).
#include <map>
#include <string>
#include <vector>

#include "manifest.h"

namespace dtw::cli {

/// One `// @lab NN.K: hint` region of the solution, with its `// @hint N:` lines.
struct Hint {
  std::string step;
  std::string text;                 // the short hint, the one the lab's DTW_TODO shows
  std::vector<std::string> levels;  // the detailed hints: levels[0] is "@hint 1", ...
  std::string file;                 // relative to the chapter's folder: "ping_pong.cpp"
  std::string solution_at;          // "solutions/00-x/ping_pong.cpp:64"
};

/// Every region in solutions/NN-x, in file order (files sorted by name).
std::vector<Hint> read_hints(const Chapter& chapter);

/// "labs/00-x/ping_pong.cpp:64" for each `DTW_TODO("<step>: ` still in the lab.
std::vector<std::string> lab_todo_locations(const Chapter& chapter, const std::string& step);

/// How many of a step's regions the lab still has as DTW_TODO.
struct StepProgress {
  int regions = 0;  // @lab regions of the step in the solution
  int todo = 0;     // DTW_TODOs of the step still in the lab
};
/// StepProgress of every step of `chapter`.
std::map<std::string, StepProgress> step_progress(const Chapter& chapter);

/// "labs/01-x/reduce_linear.cpp", ... : the lab files that hold the step's code.
std::vector<std::string> step_files(const Chapter& chapter, const std::string& step);

}  // namespace dtw::cli
