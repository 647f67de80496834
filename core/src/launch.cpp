// launch(): picks the backend and turns a collecting launch into a throwing one.
#include "dtw/launch.h"

#include "dtw/config.h"
#include "dtw/errors.h"
#include "launch_backends.h"
#if DTW_HAVE_MPI
#include "dtw/mpi.h"
#include "mpi/mpi_launch.h"
#endif
#if DTW_HAVE_NCCL
#include "nccl/nccl_launch.h"
#endif

namespace dtw {

namespace {
LaunchWrapper& launch_wrapper() {
  static LaunchWrapper wrapper = nullptr;
  return wrapper;
}

// `fn` as the installed LaunchWrapper makes it (or `fn` itself).
RankFunction wrapped(const RankFunction& fn) {
  return launch_wrapper() ? launch_wrapper()(fn) : fn;
}

// The mpi backend also takes world size 0 (= as many ranks as mpirun started),
// and the MPI test harness routes "threads" launches to it (dtw/mpi.h).
bool goes_to_mpi(const LaunchOptions& options) {
#if DTW_HAVE_MPI
  return options.backend == "mpi" || (options.backend == "threads" && mpi::route_launches());
#else
  (void)options;
  return false;
#endif
}

// Every option is checked here, before any backend sees it, for launch and
// launch_collecting alike.
void validate(int world_size, const LaunchOptions& options) {
  DTW_CHECK_ARG(world_size >= 1 || (world_size == 0 && goes_to_mpi(options)),
                "launch: world size " << world_size << " must be at least 1");
  DTW_CHECK_ARG(options.timeout > std::chrono::milliseconds::zero() &&
                    options.timeout <= kMaxLaunchTimeout,
                "launch: timeout " << options.timeout.count() << " ms is outside (0, "
                                   << kMaxLaunchTimeout.count() << "] ms (up to 30 days)");
  DTW_CHECK_ARG(options.memory_cap >= 0,
                "launch: memory cap " << options.memory_cap << " bytes must be >= 0 (0: none)");
  const bool known = options.backend == "threads" || (options.backend == "mpi" && DTW_HAVE_MPI) ||
                     (options.backend == "nccl" && DTW_HAVE_NCCL);
  DTW_CHECK_ARG(known || options.backend != "nccl",
                "launch: backend 'nccl': this build has no NCCL backend (configure where the CUDA "
                "toolkit and NCCL are installed, with -DDTW_ENABLE_CUDA=ON)");
  DTW_CHECK_ARG(known, "launch: unknown backend '"
                           << options.backend << "' (this build has: threads"
                           << (DTW_HAVE_MPI ? ", mpi" : "") << (DTW_HAVE_NCCL ? ", nccl" : "") << ")");
}

// Runs the launch on its backend; `first` receives the error launch() rethrows.
Report dispatch(int world_size, const LaunchOptions& options, const RankFunction& fn,
                std::exception_ptr* first) {
  validate(world_size, options);
#if DTW_HAVE_MPI
  if (goes_to_mpi(options)) return mpi::launch(world_size, options, fn, first);
#endif
#if DTW_HAVE_NCCL
  if (options.backend == "nccl") return nccl::launch(world_size, options, fn, first);
#endif
  return threads::launch(world_size, options, fn, first);
}

}  // namespace

void set_launch_wrapper(LaunchWrapper wrapper) { launch_wrapper() = wrapper; }

Report launch_collecting(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  return dispatch(world_size, options, wrapped(fn), nullptr);
}

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  std::exception_ptr first;
  Report report = dispatch(world_size, options, wrapped(fn), &first);
  if (first) std::rethrow_exception(first);
  return report;
}

Report launch(int world_size, const RankFunction& fn) { return launch(world_size, {}, fn); }

}  // namespace dtw
