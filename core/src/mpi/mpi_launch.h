#pragma once
// The mpi backend's launch (see dtw/mpi.h for what it promises).
#include <mpi.h>

#include <exception>

#include "dtw/launch.h"

namespace dtw::mpi {
/// Runs `fn` as this process's rank. `first_error`, when given, receives the
/// launch's first failure (the same on every process) so the caller can rethrow it.
Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error);
/// This process's communicator every launch (and report) starts from: a
/// duplicate of MPI_COMM_WORLD (initialises MPI).
MPI_Comm launches_comm();
}  // namespace dtw::mpi
