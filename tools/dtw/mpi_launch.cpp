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
#include "dtw/results.h"
#include "exit_codes.h"
#include "process.h"
#include "manifest.h"
#include "style.h"
#if DTW_HAVE_MPI
#include "dtw/mpi.h"
#endif

// A demo check with the rank that made it, as allgather_results carries it.
namespace dtw::cli {
struct IndexedCheck {
  std::int64_t rank = -1;
  DemoCheck check;
};
}  // namespace dtw::cli

namespace dtw::detail {
template <>
struct ResultCodec<cli::IndexedCheck> {
  static void put(ResultWriter& w, const cli::IndexedCheck& c) {
    ResultCodec<std::int64_t>::put(w, c.rank);
    ResultCodec<bool>::put(w, c.check.correct);
    ResultCodec<std::string>::put(w, c.check.detail);
    ResultCodec<double>::put(w, c.check.busbw_gbps);
  }
  static cli::IndexedCheck get(ResultReader& r) {
    cli::IndexedCheck c;
    c.rank = ResultCodec<std::int64_t>::get(r);
    c.check.correct = ResultCodec<bool>::get(r);
    c.check.detail = ResultCodec<std::string>::get(r);
    c.check.busbw_gbps = ResultCodec<double>::get(r);
    return c;
  }
};
}  // namespace dtw::detail

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
    check_hostfile(request.hostfile);
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
  // Each rank leaves with kRankStatusBase + its status (rank_process_status),
  // so dtw can tell the ranks' verdict from mpirun's own failures.
  cmd.insert(cmd.end(), {"-x", std::string(kRanksOfDtwEnv) + "=1"});
  // Each process is this same program; it sees mpirun's environment and runs
  // its own rank instead of starting mpirun again.
  cmd.push_back(self_path());
  cmd.insert(cmd.end(), request.args.begin(), request.args.end());
  return cmd;
}

std::vector<std::string> without_hostfile(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--hostfile") {
      ++i;  // and its value
      continue;
    }
    if (args[i].starts_with("--hostfile=")) continue;
    kept.push_back(args[i]);
  }
  return kept;
}

void check_hostfile(const std::string& hostfile) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(hostfile, ec) || access(hostfile.c_str(), R_OK) != 0)
    throw UsageError(fmt::format("--hostfile {}: {}", hostfile,
                                 std::filesystem::exists(hostfile, ec) ? "not a readable file"
                                                                       : "no such file"));
}

int run_mpirun(const MpiRunRequest& request) {
  std::vector<std::string> notes;
  const std::vector<std::string> cmd = mpirun_command(request, notes);
  for (const std::string& note : notes) fmt::print("dtw: {}\n", note);
  std::string line;
  for (const std::string& arg : cmd) line += (line.empty() ? "" : " ") + arg;
  fmt::print("dtw: {}\n", line);
  std::fflush(stdout);
  // A child like every other (process.h), not an exec: mpirun's own status
  // (1 when it cannot start the job, 137 when a rank was killed) must not
  // become dtw's; only a status a rank of dtw's left with passes through.
  const ProcessResult result = run_process(cmd, {.env = {{kRanksOfDtwEnv, "1"}}});
  if (result.ok()) return kExitOk;
  if (result.signal == 0 && !result.timed_out && result.exit_code > kRankStatusBase &&
      result.exit_code <= kRankStatusBase + kExitRunFailed)
    return result.exit_code - kRankStatusBase;  // a rank said why; its status is dtw's
  print_error(fmt::format("mpirun -np {} ended with {}", request.ranks, result.describe()));
  return kExitRunFailed;
}

int rank_process_status(int status) {
  if (status == kExitOk || std::getenv(kRanksOfDtwEnv) == nullptr || !inside_mpirun()) return status;
  return kRankStatusBase + status;
}

void share_checks_over_mpi(std::vector<std::optional<DemoCheck>>& checks) {
#if DTW_HAVE_MPI
  // Each process filled the slot of its own rank; every process gets them all.
  std::vector<IndexedCheck> mine;
  for (std::size_t r = 0; r < checks.size(); ++r)
    if (checks[r]) mine.push_back({static_cast<std::int64_t>(r), *checks[r]});
  const std::unique_ptr<Comm> all = dtw::mpi::process_comm();
  for (const std::vector<IndexedCheck>& from : allgather_results(*all, mine))
    for (const IndexedCheck& c : from)
      if (c.rank >= 0 && static_cast<std::size_t>(c.rank) < checks.size())
        checks[static_cast<std::size_t>(c.rank)] = c.check;
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
