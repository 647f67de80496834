#pragma once
// The backends launch() can run on. The threads backend is part of dtw_core;
// the mpi and nccl backends are libraries of their own (dtw::mpi, dtw::nccl)
// that register themselves here when a program links them, so a program that
// links only dtw::core carries neither MPI nor NCCL (docs/architecture.md,
// "Libraries and optional backends").
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "dtw/launch.h"

namespace dtw::detail {

struct BackendEntry {
  // The name LaunchOptions::backend selects it by ("mpi", "nccl").
  std::string name;
  // Runs a launch; `first_error` as in threads::launch.
  Report (*launch)(int world_size, const LaunchOptions& options, const RankFunction& fn,
                   std::exception_ptr* first_error) = nullptr;
  // World size 0 means "every process of the job" (mpi).
  bool takes_job_size = false;
  // Optional: claims launches asked of another backend (the MPI test harness
  // routes "threads" launches to mpi).
  bool (*claims)(const LaunchOptions& options) = nullptr;
  // Optional: throws InvalidArgument for what this backend refuses in
  // `options` or in its environment (mpi: DTW_MPI_WATCHDOG_SECONDS), so that
  // launch, and check_launch_options before a program starts anything, refuse
  // it before any rank or process runs.
  void (*check_options)(const LaunchOptions& options) = nullptr;
  // Optional: a communicator over every process of the job (dtw::process_comm).
  std::unique_ptr<Comm> (*process_comm)() = nullptr;
};

// Adds `entry` (a later entry of the same name replaces it). Returns true so
// that a backend can register from a namespace-scope initialiser.
bool register_backend(BackendEntry entry);
// The registered entry named `name`, or nullptr.
const BackendEntry* find_backend(const std::string& name);
// Every registered entry, in registration order.
std::vector<BackendEntry> registered_backends();

}  // namespace dtw::detail
