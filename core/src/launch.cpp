// launch(): picks the backend and turns a collecting launch into a throwing one.
#include "dtw/launch.h"

#include <cstdlib>
#include <string_view>

#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/process_comm.h"
#include "backend_registry.h"
#include "launch_backends.h"

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

// The registered backend that runs a launch asked of `options.backend`: the
// one of that name, unless another claims it (the MPI test harness routes
// "threads" launches to mpi, dtw/mpi.h). nullptr: the threads backend.
const detail::BackendEntry* chosen_backend(const LaunchOptions& options) {
  if (options.backend == "threads") {
    for (const detail::BackendEntry& e : detail::registered_backends())
      if (e.claims && e.claims(options)) return detail::find_backend(e.name);
    return nullptr;
  }
  return detail::find_backend(options.backend);
}

// What this program can run on, for error messages.
std::string known_backends() {
  std::string names = "threads";
  for (const detail::BackendEntry& e : detail::registered_backends()) names += ", " + e.name;
  return names;
}

// LaunchOptions::device. "cuda" on the threads backend needs OS threads: the
// CUDA runtime's current device is per thread, which the fibers of one worker
// would share, and a rank waiting for its stream would hold up the others.
// kAuto runs threads then; only an explicit fiber mode is refused.
void check_device(const LaunchOptions& options, const detail::BackendEntry* backend) {
  const std::string& device = options.device;
  DTW_CHECK_ARG(device.empty() || device == "host" || device == "cuda",
                "launch: device '" << device
                                   << "' is not a place launch knows: \"\" or \"host\" (each "
                                      "backend's own), or \"cuda\" (threads ranks with device "
                                      "buffers, or nccl)");
  const std::string runs_on = backend ? backend->name : "threads";
  const std::string asked = runs_on == options.backend
                                ? ""
                                : " (which runs this program's '" + options.backend + "' launches)";
  DTW_CHECK_ARG(device != "host" || runs_on != "nccl",
                "launch: device 'host' with backend 'nccl': the nccl backend runs every rank on a "
                "GPU (leave device empty, or use backend 'threads' for ranks on the host)");
  if (device != "cuda") return;
  DTW_CHECK_ARG(runs_on == "threads" || runs_on == "nccl",
                "launch: device 'cuda' with backend '"
                    << runs_on << "'" << asked
                    << ": only the threads backend (ranks sharing GPUs) and nccl (one rank per "
                       "GPU) run ranks on CUDA devices");
  DTW_CHECK_ARG(DTW_HAVE_CUDA, "launch: device 'cuda': this build has no CUDA (configure where "
                               "the CUDA toolkit is installed, with -DDTW_ENABLE_CUDA=ON)");
  if (runs_on != "threads") return;
  const char* env = std::getenv("DTW_RANK_MODE");
  const bool fibers =
      options.rank_mode == RankMode::kFibers ||
      (options.rank_mode == RankMode::kAuto && env && std::string_view(env) == "fibers");
  DTW_CHECK_ARG(!fibers, "launch: device 'cuda' with rank mode fibers ("
                             << (options.rank_mode == RankMode::kFibers ? "RankMode::kFibers"
                                                                        : "DTW_RANK_MODE=fibers")
                             << "): ranks on GPUs need an OS thread each (the CUDA runtime keeps "
                                "the current device per thread, and a rank waiting for its "
                                "stream would hold up its worker's other fibers); use "
                                "RankMode::kThreads or kAuto");
}

// Every option is checked here, before any backend sees it, for launch and
// launch_collecting alike.
void validate(int world_size, const LaunchOptions& options) {
  const bool known = options.backend == "threads" || detail::find_backend(options.backend);
  // A backend this build has, but this program did not link (its library
  // registers it): say which library to link.
  const bool built = (options.backend == "mpi" && DTW_HAVE_MPI) ||
                     (options.backend == "nccl" && DTW_HAVE_NCCL);
  DTW_CHECK_ARG(known || !built, "launch: backend '"
                                     << options.backend << "' is built but not linked into this "
                                     << "program: link dtw::" << options.backend
                                     << " (this program has: " << known_backends() << ")");
  DTW_CHECK_ARG(known || options.backend != "nccl",
                "launch: backend 'nccl': this build has no NCCL backend (configure where the CUDA "
                "toolkit and NCCL are installed, with -DDTW_ENABLE_CUDA=ON)");
  DTW_CHECK_ARG(known, "launch: unknown backend '" << options.backend
                                                   << "' (this program has: " << known_backends()
                                                   << ")");
  const detail::BackendEntry* backend = chosen_backend(options);
  DTW_CHECK_ARG(world_size >= 1 || (world_size == 0 && backend && backend->takes_job_size),
                "launch: world size " << world_size << " must be at least 1");
  DTW_CHECK_ARG(options.timeout > std::chrono::milliseconds::zero() &&
                    options.timeout <= kMaxLaunchTimeout,
                "launch: timeout " << options.timeout.count() << " ms is outside (0, "
                                   << kMaxLaunchTimeout.count() << "] ms (up to 30 days)");
  DTW_CHECK_ARG(options.rank_mode == RankMode::kAuto || options.rank_mode == RankMode::kThreads ||
                    options.rank_mode == RankMode::kFibers,
                "launch: rank mode " << static_cast<int>(options.rank_mode)
                                     << " is not a RankMode (kAuto 0, kThreads 1, kFibers 2)");
  DTW_CHECK_ARG(options.memory_cap >= 0,
                "launch: memory cap " << options.memory_cap << " bytes must be >= 0 (0: none)");
  DTW_CHECK_ARG(options.bytes_per_rank >= 0,
                "launch: bytes per rank " << options.bytes_per_rank
                                          << " must be >= 0 (0: not given)");
  check_device(options, backend);
  if (backend && backend->check_options) backend->check_options(options);
}

// Runs the launch on its backend; `first` receives the error launch() rethrows.
Report dispatch(int world_size, const LaunchOptions& options, const RankFunction& fn,
                std::exception_ptr* first) {
  validate(world_size, options);
  if (const detail::BackendEntry* backend = chosen_backend(options))
    return backend->launch(world_size, options, fn, first);
  return threads::launch(world_size, options, fn, first);
}

}  // namespace

void set_launch_wrapper(LaunchWrapper wrapper) { launch_wrapper() = wrapper; }

void check_launch_options(int world_size, const LaunchOptions& options) {
  validate(world_size, options);
}

std::unique_ptr<Comm> process_comm(const std::string& backend) {
  const detail::BackendEntry* entry = detail::find_backend(backend);
  return entry && entry->process_comm ? entry->process_comm() : nullptr;
}

// An empty std::function would throw std::bad_function_call on every rank
// ("uncaught std::exception: bad_function_call"): refused before any rank runs.
void check_function(const RankFunction& fn) {
  DTW_CHECK_ARG(static_cast<bool>(fn), "launch: the rank function is empty (an empty "
                                       "std::function); pass a callable taking dtw::Comm&");
}

Report launch_collecting(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  check_function(fn);
  return dispatch(world_size, options, wrapped(fn), nullptr);
}

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  check_function(fn);
  std::exception_ptr first;
  Report report = dispatch(world_size, options, wrapped(fn), &first);
  if (first) std::rethrow_exception(first);
  return report;
}

Report launch(int world_size, const RankFunction& fn) { return launch(world_size, {}, fn); }

}  // namespace dtw
