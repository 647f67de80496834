#pragma once
// Running the programs dtw drives (cmake, test programs, diff, benchmarks).
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace dtw::cli {

struct ProcessResult {
  int exit_code = -1;  // when the program exited normally
  int signal = 0;      // the signal that ended it, 0 if none
  bool timed_out = false;
  std::string output;  // stdout and stderr together, when captured

  bool ok() const { return signal == 0 && !timed_out && exit_code == 0; }
  /// "exit status 1", "signal 11 (Segmentation fault)", "no result within 120 s".
  std::string describe() const;
};

enum class Output { kInherit, kCapture, kDiscard };

struct ProcessOptions {
  Output output = Output::kInherit;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  std::string working_dir;                               // empty: this process's
  std::chrono::seconds timeout{0};                       // 0: none; else killed after it
};

/// Runs argv[0] (looked up in PATH) and waits for it.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options);

/// Replaces this process with argv[0]; returns only on failure (with errno set).
void exec_program(const std::vector<std::string>& argv);

/// Redirects this process's stdout to /dev/null while alive (demos that print).
class StdoutSilencer {
 public:
  StdoutSilencer();
  ~StdoutSilencer();
  StdoutSilencer(const StdoutSilencer&) = delete;
  StdoutSilencer& operator=(const StdoutSilencer&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace dtw::cli
