#pragma once
// `dtw run DEMO --backend mpi`, `dtw train --backend mpi` and `dtw bench
// train --backend mpi`: the program starts mpirun itself, which re-runs this
// same program, with the same arguments, once per rank; each of those
// processes sees that mpirun started it and runs its rank.
#include <optional>
#include <string>
#include <vector>

#include "dtw/demo.h"

namespace dtw::cli {

struct MpiRunRequest {
  /// What each process runs: this program with these arguments, e.g. {"run",
  /// "ring-allreduce", "--backend", "mpi", "--ranks", "4", "--trace", "t.json"}.
  std::vector<std::string> args;
  int ranks = 1;             // processes to start
  std::string hostfile;      // OpenMPI hostfile; empty: every rank on this machine
};

/// `args` without `--hostfile FILE` (and `--hostfile=FILE`): what the parent
/// gave mpirun, which the ranks it starts have no use for (and, on another
/// machine, perhaps no such file).
std::vector<std::string> without_hostfile(const std::vector<std::string>& args);

/// Refuses (UsageError) a --hostfile that is not a readable file, as bad
/// usage before mpirun starts: mpirun's own "unable to open the hostfile"
/// would end it with status 1, which reads like dtw's "a check failed".
void check_hostfile(const std::string& hostfile);

/// True in a process that mpirun/mpiexec started.
bool inside_mpirun();

/// The mpirun command line for `request`; `notes` receives one line per option
/// dtw added on its own (run as root, more ranks than cores) and why.
std::vector<std::string> mpirun_command(const MpiRunRequest& request, std::vector<std::string>& notes);

/// Set (to 1) in the environment of the ranks run_mpirun starts.
inline constexpr const char* kRanksOfDtwEnv = "DTW_RANK_OF_DTW_MPIRUN";
/// Such a rank leaves with kRankStatusBase + its status 1-3 (0 stays 0):
/// mpirun passes the first non-zero status of a rank on, and its own
/// failures (a hostfile it cannot read: 1) are small numbers too.
inline constexpr int kRankStatusBase = 80;

/// Prints the notes and the command, runs mpirun (its output goes straight to
/// the terminal, OpenMPI's lines naming a failed rank included) and returns
/// dtw's exit status: a rank's own (1-3, dtw's convention) when mpirun passed
/// one on, else kExitRunFailed after saying how mpirun ended (its own
/// failure, a status a rank did not choose, a rank killed by a signal,
/// decoded). Throws UsageError if mpirun is missing or the hostfile cannot be read.
int run_mpirun(const MpiRunRequest& request);

/// The status this process exits with for dtw's `status`: under an mpirun
/// that run_mpirun started, kRankStatusBase + status (0 stays 0); else status.
int rank_process_status(int status);

/// Under mpirun: merges every process's demo checks (each fills only its own
/// rank's slot). Collective: every process must call it. A no-op without MPI.
void share_checks_over_mpi(std::vector<std::optional<DemoCheck>>& checks);

/// Under mpirun: true only on rank 0, the process that prints the results.
bool is_printing_process();

/// Under mpirun: the number of processes of the job (1 in a build without MPI).
int mpi_job_size();

}  // namespace dtw::cli
