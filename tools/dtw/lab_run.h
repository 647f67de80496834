#pragma once
// What `dtw run --lab` and `dtw train --lab` share: handing over to a
// chapter's lab-run program (dtw_chNN_lab_run: the chapter's demos and
// strategies linked with the learner's library), and reading the step out of
// the NotImplemented a DTW_TODO raises, to say plainly what is not written.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dtw::cli {

/// A subcommand a chapter's lab-run program has beside `run` and `train`
/// (chapter 08's: `plan`, for `dtw plan --lab`), registered by a source file
/// that only that chapter's program builds (tools/dtw/CMakeLists.txt).
struct LabRunCommand {
  std::function<CLI::App*(CLI::App&)> add;  ///< adds the subcommand and its options
  std::function<int()> run;                 ///< runs it, once parsed; the exit status
};
/// The registered extra subcommands (a static, filled before main).
std::vector<LabRunCommand>& lab_run_commands();

/// Replaces this process with chapter `chapter`'s lab-run program, given
/// `args` ("run DEMO ..." or "train ..."); throws UsageError when it is not built.
[[noreturn]] void exec_lab_run(const std::string& chapter, const std::vector<std::string>& args);

/// A step the learner has not written: its id ("02.3") and its short hint.
struct NotWritten {
  std::string step;
  std::string hint;
};

/// The step of a DTW_TODO's message ("rank 1: 02.3: hint (NotImplemented) [file:line]"), if it is one.
std::optional<NotWritten> not_written(const std::string& message);

/// "Not written yet: your lab has not written step S yet (hint), and WHO needed
/// it.", then the check that tests the step and `instead`, what runs the solution.
void print_not_written(const NotWritten& w, const std::string& chapter, const std::string& who,
                       const std::string& instead);

}  // namespace dtw::cli
