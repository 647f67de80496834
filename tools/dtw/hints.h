#pragma once
// The hints of a chapter's steps, read from the @lab markers of its solution,
// and where each step's DTW_TODO sits in the lab.
#include <string>
#include <vector>

#include "manifest.h"

namespace dtw::cli {

/// One `// @lab NN.K: hint` region of the solution.
struct Hint {
  std::string step;
  std::string text;
  std::string solution_at;  // "solutions/00-x/ping_pong.cpp:64"
};

/// Every marker in solutions/NN-x, in file order (files sorted by name).
std::vector<Hint> read_hints(const Chapter& chapter);

/// "labs/00-x/ping_pong.cpp:64" for each `DTW_TODO("<step>: ` still in the lab.
std::vector<std::string> lab_todo_locations(const Chapter& chapter, const std::string& step);

}  // namespace dtw::cli
