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

/// The program under test, so that a test can be pointed at another build
/// (to see it fail there): `dtw` is DTW_CLI_PROGRAM when set, otherwise this
/// build's (DTW_PROGRAM); a benchmark `dtw_bench_NAME` is looked for in
/// DTW_BENCH_DIR when set, otherwise in this build's bench folder. "" when the
/// test target was given no such program.
std::string dtw_program();
std::string bench_program(const std::string& name);

/// dtw_program() with `args`, run to the end in the temporary folder.
Finished run_dtw(std::vector<std::string> args);

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
