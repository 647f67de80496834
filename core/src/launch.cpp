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
}  // namespace

void set_launch_wrapper(LaunchWrapper wrapper) { launch_wrapper() = wrapper; }

Report launch_collecting(int world_size, const LaunchOptions& options, const RankFunction& user_fn) {
  const RankFunction fn = wrapped(user_fn);
  DTW_CHECK_ARG(world_size >= 1 || (world_size == 0 && goes_to_mpi(options)),
                "launch: world size " << world_size << " must be at least 1");
  DTW_CHECK_ARG(options.timeout.count() > 0,
                "launch: timeout " << options.timeout.count() << " ms must be positive");
  DTW_CHECK_ARG(options.memory_cap >= 0,
                "launch: memory cap " << options.memory_cap << " bytes must be >= 0 (0: none)");
#if DTW_HAVE_MPI
  if (goes_to_mpi(options)) return mpi::launch(world_size, options, fn, nullptr);
#endif
  if (options.backend == "threads") return threads::launch(world_size, options, fn, nullptr);
#if DTW_HAVE_NCCL
  if (options.backend == "nccl") return nccl::launch(world_size, options, fn, nullptr);
#endif
  DTW_CHECK_ARG(options.backend != "nccl",
                "launch: backend 'nccl': this build has no NCCL backend (configure where the CUDA "
                "toolkit and NCCL are installed, with -DDTW_ENABLE_CUDA=ON)");
  DTW_CHECK_ARG(false, "launch: unknown backend '"
                           << options.backend << "' (this build has: threads"
                           << (DTW_HAVE_MPI ? ", mpi" : "") << (DTW_HAVE_NCCL ? ", nccl" : "") << ")");
  return {};
}

Report launch(int world_size, const LaunchOptions& options, const RankFunction& user_fn) {
  const RankFunction fn = wrapped(user_fn);
  DTW_CHECK_ARG(world_size >= 1 || (world_size == 0 && goes_to_mpi(options)),
                "launch: world size " << world_size << " must be at least 1");
  DTW_CHECK_ARG(options.memory_cap >= 0,
                "launch: memory cap " << options.memory_cap << " bytes must be >= 0 (0: none)");
#if DTW_HAVE_MPI
  if (goes_to_mpi(options)) {
    DTW_CHECK_ARG(options.timeout.count() > 0,
                  "launch: timeout " << options.timeout.count() << " ms must be positive");
    std::exception_ptr first;
    Report report = mpi::launch(world_size, options, fn, &first);
    if (first) std::rethrow_exception(first);
    return report;
  }
#endif
  if (options.backend == "threads") {
    std::exception_ptr first;
    Report report = threads::launch(world_size, options, fn, &first);
    if (first) std::rethrow_exception(first);
    return report;
  }
#if DTW_HAVE_NCCL
  if (options.backend == "nccl") {
    DTW_CHECK_ARG(options.timeout.count() > 0,
                  "launch: timeout " << options.timeout.count() << " ms must be positive");
    std::exception_ptr first;
    Report report = nccl::launch(world_size, options, fn, &first);
    if (first) std::rethrow_exception(first);
    return report;
  }
#endif
  return launch_collecting(world_size, options, user_fn);
}

Report launch(int world_size, const RankFunction& fn) { return launch(world_size, {}, fn); }

}  // namespace dtw
