#include "program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace dtw::testing {

std::string dtw_program() {
  if (const char* other = std::getenv("DTW_CLI_PROGRAM"); other && *other) return other;
#ifdef DTW_PROGRAM
  return DTW_PROGRAM;
#else
  return "";
#endif
}

std::string bench_program(const std::string& name) {
  std::string dir;
  if (const char* other = std::getenv("DTW_BENCH_DIR"); other && *other) dir = other;
#ifdef DTW_BENCH_DIR
  if (dir.empty()) dir = DTW_BENCH_DIR;
#endif
  return dir.empty() ? "" : dir + "/dtw_bench_" + name;
}

namespace {

// Starts argv with stdout and stderr on one pipe; returns the read end.
pid_t start(const std::vector<std::string>& argv, const std::string& dir, int& read_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror("execv");
    _exit(127);
  }
  close(fds[1]);
  read_fd = fds[0];
  return pid;
}

}  // namespace

Finished run_program(const std::vector<std::string>& argv, const std::string& dir) {
  int fd = -1;
  const pid_t pid = start(argv, dir, fd);
  Finished out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) out.output.append(buffer, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

Running::Running(const std::vector<std::string>& argv, const std::string& dir) {
  pid_ = start(argv, dir, fd_);
}

Running::~Running() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(fd_);
}

bool Running::wait_for_line(const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::size_t at = seen_.find(text);
    if (at != std::string::npos && seen_.find('\n', at) != std::string::npos) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fd_, buffer, sizeof buffer);
    if (n == 0) return false;
    if (n > 0) seen_.append(buffer, static_cast<std::size_t>(n));
  }
}

bool Running::alive() {
  if (exited_) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

}  // namespace dtw::testing

namespace dtw::testing {

Finished run_dtw(std::vector<std::string> args) {
  args.insert(args.begin(), dtw_program());
  return run_program(args, std::filesystem::temp_directory_path().string());
}

}  // namespace dtw::testing
