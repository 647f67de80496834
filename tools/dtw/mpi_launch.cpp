#include "mpi_launch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "dtw/config.h"
#include "manifest.h"
#include "style.h"
#if DTW_HAVE_MPI
#include "dtw/mpi.h"
#endif

namespace dtw::cli {
namespace {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dtw") : p.string();
}

}  // namespace

bool inside_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

std::vector<std::string> mpirun_command(const MpiRunRequest& request, std::vector<std::string>& notes) {
  std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) mpirun = find_on_path("mpiexec");
  if (mpirun.empty())
    throw UsageError("--backend mpi needs OpenMPI's mpirun on PATH (Debian: apt-get install openmpi-bin)");
  std::vector<std::string> cmd{mpirun, "-np", std::to_string(request.ranks)};
  if (geteuid() == 0) {
    cmd.emplace_back("--allow-run-as-root");
    notes.emplace_back("running as root: added --allow-run-as-root (OpenMPI refuses root otherwise)");
  }
  if (!request.hostfile.empty()) {
    cmd.insert(cmd.end(), {"--hostfile", request.hostfile});
    notes.emplace_back(fmt::format("ranks placed by the hostfile {} (its slots= decide how many per host)",
                                   request.hostfile));
  } else {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (static_cast<unsigned>(request.ranks) > cores) {
      cmd.emplace_back("--oversubscribe");
      notes.emplace_back(fmt::format(
          "{} ranks on {} cores: added --oversubscribe (ranks share cores; timings suffer)", request.ranks,
          cores));
    }
  }
  // mpirun gives its local ranks a terminal of their own, so they would colour
  // their output even when dtw's is piped; tell them (on every host) not to.
  if (!color_enabled()) cmd.insert(cmd.end(), {"-x", "NO_COLOR=1"});
  // Each process is this same program; it sees mpirun's environment and runs
  // its own rank instead of starting mpirun again.
  cmd.insert(cmd.end(), {self_path(), "run", request.demo, "--backend", "mpi", "--ranks",
                         std::to_string(request.ranks)});
  cmd.insert(cmd.end(), request.forward.begin(), request.forward.end());
  return cmd;
}

void exec_mpirun(const MpiRunRequest& request) {
  std::vector<std::string> notes;
  const std::vector<std::string> cmd = mpirun_command(request, notes);
  for (const std::string& note : notes) fmt::print("dtw: {}\n", note);
  std::string line;
  for (const std::string& arg : cmd) line += (line.empty() ? "" : " ") + arg;
  fmt::print("dtw: {}\n", line);
  std::fflush(stdout);
  std::vector<char*> argv;
  for (const std::string& arg : cmd) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execv(cmd[0].c_str(), argv.data());
  throw UsageError(fmt::format("could not start {}: {}", cmd[0], std::strerror(errno)));
}

void share_checks_over_mpi(std::vector<std::optional<DemoCheck>>& checks) {
#if DTW_HAVE_MPI
  // One line per filled slot: "rank correct busbw detail".
  std::string mine;
  for (std::size_t r = 0; r < checks.size(); ++r) {
    if (!checks[r]) continue;
    std::string detail = checks[r]->detail;
    std::replace(detail.begin(), detail.end(), '\n', ' ');
    mine += fmt::format("{} {} {} {}\n", r, checks[r]->correct ? 1 : 0, checks[r]->busbw_gbps, detail);
  }
  for (const std::string& part : dtw::mpi::allgather_strings(mine)) {
    std::istringstream lines(part);
    std::string entry;
    while (std::getline(lines, entry)) {
      std::istringstream fields(entry);
      std::size_t rank = 0;
      int correct = 0;
      DemoCheck check;
      fields >> rank >> correct >> check.busbw_gbps;
      std::getline(fields >> std::ws, check.detail);
      check.correct = correct != 0;
      if (rank < checks.size()) checks[rank] = check;
    }
  }
#else
  (void)checks;
#endif
}

bool is_printing_process() {
#if DTW_HAVE_MPI
  return !inside_mpirun() || dtw::mpi::world_rank() == 0;
#else
  return true;
#endif
}

int mpi_job_size() {
#if DTW_HAVE_MPI
  return dtw::mpi::world_size();
#else
  return 1;
#endif
}

}  // namespace dtw::cli
