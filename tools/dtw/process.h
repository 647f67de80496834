#pragma once
// Running the programs dtw drives (cmake, test programs, diff, mpirun,
// gnuplot, benchmarks): the one place a child process is started and its wait
// status decoded, shared by the dtw program and the benchmark programs.
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
  /// "exit status 1", "killed by signal 9 (Killed)", "exit status 137 (128 +
  /// signal 9, Killed: how mpirun and shells report a child killed by it)",
  /// "no result before the time limit".
  std::string describe() const;
  /// The lines of `output` that say which process failed and how (OpenMPI's
  /// "process rank 2 with PID ... exited on signal 9", "Killed", "error"),
  /// at most `max_lines` of them, else its last lines: what a report keeps.
  std::string failure_lines(std::size_t max_lines = 8) const;
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
