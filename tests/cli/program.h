#pragma once
// Runs a program with arguments and collects its exit status and output
// (stdout and stderr together), or reads its output while it runs.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace dtw::testing {

struct Finished {
  int exit_code = -1;  // -1 when it did not exit normally
  int signal = 0;
  std::string output;
};

/// Runs `argv` to the end, with `dir` as the working folder ("" = this one).
Finished run_program(const std::vector<std::string>& argv, const std::string& dir = "");

/// A program whose output is read while it runs (a pipe, as `| tee` gives it).
class Running {
 public:
  explicit Running(const std::vector<std::string>& argv, const std::string& dir = "");
  ~Running();  // kills it if still running
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
  /// Reads until a line containing `text` has arrived; false when the program
  /// closed its output or `limit` passed first. `seen` holds what was read.
  bool wait_for_line(const std::string& text, std::chrono::seconds limit);
  /// True while the program has not exited.
  bool alive();
  const std::string& seen() const { return seen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string seen_;
};

}  // namespace dtw::testing
