#pragma once
/// @file
/// The MPI backend's process-level controls (only in builds with DTW_HAVE_MPI).
///
/// With the mpi backend every rank is one process started by `mpirun`; the
/// rank function passed to `dtw::launch` runs in this process as its MPI rank.
/// `dtw::launch(n, {.backend = "mpi"}, fn)` needs `n` equal to the number of
/// processes of the job, or `n == 0` to take it from `mpirun`; a smaller `n`
/// runs on processes 0..n-1 while the others wait for the report. Every process
/// gets the same Report (traffic matrix, trace, errors), and the same error is
/// rethrown on every process.

#include <memory>

#include "dtw/comm.h"

namespace dtw::mpi {

/// Initialises MPI once for this process (MPI_Init_thread); later calls do
/// nothing. MPI is finalised when the process exits normally.
void init();
/// True when this process was started by mpirun/mpiexec (reads the environment
/// OpenMPI and PMIx set; does not initialise MPI).
bool inside_mpirun();
/// This process's rank in MPI_COMM_WORLD (initialises MPI).
int world_rank();
/// The number of processes in MPI_COMM_WORLD (initialises MPI).
int world_size();
/// A communicator of every process of the job, outside any launch: collective
/// over MPI_COMM_WORLD, each call a new one (its own context). What code that
/// runs around launches uses to share per-process values with
/// `dtw::allgather_results` (dtw/results.h), as `dtw run` does with the demo
/// checks and `launch` with the pieces of its report. Host memory, no ledger.
std::unique_ptr<Comm> process_comm();

/// Test-harness mode: launches that ask for the default "threads" backend run
/// on MPI instead. A world of at most world_size() ranks runs on processes
/// 0..n-1; a larger one runs on the threads backend, the same launch inside
/// every process. This lets unchanged tests that
/// sweep world sizes run under `mpiexec -n 2/3/4`.
void set_route_launches(bool on);
/// Whether test-harness routing is on.
bool route_launches();

}  // namespace dtw::mpi
