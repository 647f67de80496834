// Runs a world of ranks, as threads or as fibers (fibers.h), and gathers
// their traffic, trace and errors.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

#include "dtw/errors.h"
#include "dtw/world_fit.h"
#include "launch_backends.h"
#include "rank_threads.h"
#include "threads/device_ranks.h"
#include "threads/fibers.h"
#include "threads/threads_comm.h"

namespace dtw::threads {
namespace {

void run_rank(World& world, Comm& comm, const RankFunction& fn, detail::RankFailures& failures) {
  const int rank = comm.world_rank();
  const std::exception_ptr caught = detail::run_recording(rank, failures, [&] { fn(comm); });
  if (caught) {
    try {
      std::rethrow_exception(caught);
    } catch (const Error& e) {
      world.abort(rank, e.kind());
    }
  }
  const std::string pending = world.finish_rank(rank);
  if (!caught && !pending.empty()) {
    InvalidArgument e("returned with requests never waited for (call wait or wait_all):" + pending);
    e.set_rank(rank);
    failures.add(rank, e, std::make_exception_ptr(e));
    world.abort(rank, e.kind());
  }
}

// A rank on a GPU (LaunchOptions::device "cuda"): its stream is made on its
// own thread, whose current device the CUDA runtime keeps per thread, and
// released once its communicators are gone.
void run_device_rank(const std::shared_ptr<World>& world,
                     const std::shared_ptr<DeviceRanks>& devices, int r,
                     const detail::RankRecorders& recorders, const RankFunction& fn,
                     detail::RankFailures& failures) {
  Exec exec;
  const std::exception_ptr failed = detail::run_recording(
      r, failures, [&] { exec = devices->open_rank(r, recorders.ledgers[r]); });
  if (failed) {
    std::string kind = "Error";
    try {
      std::rethrow_exception(failed);
    } catch (const Error& e) {
      kind = e.kind();
    }
    world->abort(r, kind);
    world->finish_rank(r);
  } else {
    ThreadsComm comm(world, 0, r, recorders.members, recorders.traffic[r], recorders.tracers[r],
                     exec, devices);
    run_rank(*world, comm, fn, failures);
  }
  devices->close_rank(r);
}

}  // namespace

namespace {

// Worlds this small fit anywhere this program runs: reading /proc on every
// one of the tests' thousands of small launches would only cost time.
constexpr int kCheckFitFrom = 64;

int hardware_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Fiber mode's worker threads: one per hardware thread, or DTW_FIBER_WORKERS.
int worker_count() {
  const char* env = std::getenv("DTW_FIBER_WORKERS");
  if (env == nullptr) return hardware_threads();
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  DTW_CHECK_ARG(end != env && *end == '\0' && n >= 1 && n <= 1024,
                "launch: DTW_FIBER_WORKERS is '" << env
                                                 << "': it takes a number of worker threads from 1 "
                                                    "to 1024");
  return static_cast<int>(n);
}

// One OS thread per rank.
void run_threads(int world_size, World& world, detail::RankFailures& failures,
                 const std::function<void(int)>& body) {
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    try {
      threads.emplace_back(body, r);
    } catch (const std::system_error& e) {
      // The machine refused a thread the estimate let through: the ranks
      // already running must not wait for ranks that will never start.
      OutOfMemory error("launch: could only start " + std::to_string(r) + " of " +
                        std::to_string(world_size) + " rank threads (" + e.what() +
                        "): use fewer ranks, or raise the limit it hit: " +
                        stack_limits_hint(machine_room()));
      error.set_rank(r);
      failures.add(r, error, std::make_exception_ptr(error));
      world.abort(r, error.kind());
      break;
    }
  }
}  // jthreads join here

// Every rank a fiber of a pool with one worker thread per hardware thread.
void run_fibers(int world_size, World& world, detail::RankFailures& failures,
                const std::function<void(int)>& body) {
  FiberPool pool(world_size, worker_count());
  std::string why;
  const int mapped = pool.map_stacks(kFiberStackBytes, &why);
  if (mapped < world_size) {
    // No rank has run yet: fail the launch before any starts.
    OutOfMemory error("launch: could map the stacks of only " + std::to_string(mapped) + " of " +
                      std::to_string(world_size) + " rank fibers (" + why +
                      "): use fewer ranks, or raise the limit it hit: " +
                      stack_limits_hint(machine_room()));
    error.set_rank(mapped);
    failures.add(mapped, error, std::make_exception_ptr(error));
    return;
  }
  world.use_fibers(&pool);
  pool.run(body);
}

}  // namespace

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error) {
  // Device buffers: every rank an OS thread (launch refused fibers with them).
  const std::shared_ptr<DeviceRanks> devices =
      options.device == "cuda" ? make_device_ranks(world_size) : nullptr;
  const bool fibers = !devices && ranks_run_as_fibers(world_size, options.rank_mode);
  const int workers = fibers ? worker_count() : 0;
  if (world_size >= kCheckFitFrom || options.bytes_per_rank > 0)
    check_threads_world_fits(world_size, machine_room(), workers, options.bytes_per_rank);
  auto world = std::make_shared<World>(world_size, options.timeout);
  detail::RankRecorders recorders(world_size, options.trace, options.memory_cap);
  if (devices) {
    world->use_devices(devices);
    for (int r = 0; r < world_size; ++r)
      recorders.places[r] = "cuda:" + std::to_string(devices->device_of(r));
  }
  detail::RankFailures failures;
  failures.set_memory_note(describe_world_estimate(world_size, workers, options.bytes_per_rank));
  const std::function<void(int)> body = [&](int r) {
    if (devices) return run_device_rank(world, devices, r, recorders, fn, failures);
    ThreadsComm comm(world, 0, r, recorders.members, recorders.traffic[r], recorders.tracers[r],
                     Exec::host().with_ledger(recorders.ledgers[r]));
    run_rank(*world, comm, fn, failures);
  };
  if (fibers) run_fibers(world_size, *world, failures, body);
  else run_threads(world_size, *world, failures, body);
  return recorders.report("threads", failures, first_error);
}

}  // namespace dtw::threads

namespace dtw {

bool ranks_run_as_fibers(int world_size, RankMode mode) {
  if (mode == RankMode::kAuto) {
    // Read on every launch (a test may set it), as cheap as a launch's
    // smallest allocation.
    const char* env = std::getenv("DTW_RANK_MODE");
    const std::string_view value = env ? env : "auto";
    if (value == "threads") return false;
    if (value == "fibers") return true;
    DTW_CHECK_ARG(value == "auto", "launch: DTW_RANK_MODE is '"
                                       << value << "': it takes threads, fibers or auto");
  }
  if (mode != RankMode::kAuto) return mode == RankMode::kFibers;
  // Past a few ranks per core, a blocking exchange is nearly always an OS
  // thread switch (several microseconds); a fiber switch is some ten
  // nanoseconds. Below that, threads spin and keep every core busy.
  return world_size >= kFiberWorldFrom &&
         world_size > kFibersPerHardwareThread * threads::hardware_threads();
}

}  // namespace dtw
