#include "process.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dtw::cli {

std::string ProcessResult::describe() const {
  if (timed_out) return "no result before the time limit";
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  if (exit_code > 128 && exit_code < 128 + NSIG)
    return fmt::format("exit status {} (128 + signal {}, {}: how mpirun and shells report a "
                       "child killed by it)",
                       exit_code, exit_code - 128, strsignal(exit_code - 128));
  return fmt::format("exit status {}", exit_code);
}

std::string ProcessResult::failure_lines(std::size_t max_lines) const {
  std::vector<std::string> lines, telling;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" -\t") == std::string::npos) continue;  // rules, blank lines
    lines.push_back(line);
    for (const char* word : {"rank", "signal", "Killed", "killed", "error", "Error", "exited",
                             "abort", "Abort"})
      if (line.find(word) != std::string::npos) {
        telling.push_back(line);
        break;
      }
  }
  const std::vector<std::string>& pick = telling.empty() ? lines : telling;
  const std::size_t first = pick.size() > max_lines ? pick.size() - max_lines : 0;
  std::string out;
  for (std::size_t i = first; i < pick.size(); ++i) out += (out.empty() ? "" : "\n") + pick[i];
  return out;
}

namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw std::invalid_argument("run_process: empty command");
  // Captured output goes through a file rather than a pipe, so a chatty child
  // can never block on a full pipe while we wait for it.
  std::string capture_path;
  int out_fd = -1;
  if (options.output == Output::kCapture) {
    std::string name = (std::filesystem::temp_directory_path() / "dtw-output-XXXXXX").string();
    out_fd = mkstemp(name.data());
    if (out_fd < 0) throw std::runtime_error(fmt::format("mkstemp: {}", std::strerror(errno)));
    capture_path = name;
  } else if (options.output == Output::kDiscard) {
    out_fd = open("/dev/null", O_WRONLY);
  }
  std::fflush(stdout);
  std::cout.flush();
  const std::vector<char*> args = c_argv(argv);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    for (const auto& [key, value] : options.env) setenv(key.c_str(), value.c_str(), 1);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) _exit(127);
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    execvp(args[0], args.data());
    std::fprintf(stderr, "dtw: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  if (out_fd >= 0) close(out_fd);

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, options.timeout.count() > 0 ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("waitpid: {}", std::strerror(errno)));
    if (options.timeout.count() > 0 && std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!result.timed_out) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  if (!capture_path.empty()) {
    std::ifstream in(capture_path);
    std::ostringstream text;
    text << in.rdbuf();
    result.output = text.str();
    std::filesystem::remove(capture_path);
  }
  return result;
}

void exec_program(const std::vector<std::string>& argv) {
  std::fflush(stdout);
  std::cout.flush();
  const std::vector<char*> args = c_argv(argv);
  execvp(args[0], args.data());
}

StdoutSilencer::StdoutSilencer() {
  std::fflush(stdout);
  std::cout.flush();
  saved_ = dup(STDOUT_FILENO);
  const int null_fd = open("/dev/null", O_WRONLY);
  if (null_fd >= 0) {
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
  }
}

StdoutSilencer::~StdoutSilencer() {
  std::fflush(stdout);
  std::cout.flush();
  if (saved_ >= 0) {
    dup2(saved_, STDOUT_FILENO);
    close(saved_);
  }
}

}  // namespace dtw::cli
