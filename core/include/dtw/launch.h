#pragma once
/// @file
/// `dtw::launch`: run a function on every rank of a new world and report what happened.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/memory.h"
#include "dtw/trace.h"
#include "dtw/traffic.h"

namespace dtw {

/// The longest `LaunchOptions::timeout` a launch accepts: 30 days.
inline constexpr std::chrono::milliseconds kMaxLaunchTimeout{30LL * 24 * 3600 * 1000};

/// How the threads backend runs the ranks of a world (the other backends
/// ignore it: their ranks are processes, or threads driving GPUs).
enum class RankMode {
  /// Fibers for a world much larger than the machine: at least
  /// kFiberWorldFrom ranks and more than kFibersPerHardwareThread ranks per
  /// hardware thread; threads otherwise. The environment variable
  /// DTW_RANK_MODE (`threads`, `fibers` or `auto`) overrides this rule for
  /// every launch of the process that leaves the mode at kAuto.
  kAuto,
  /// One OS thread per rank: a waiting rank spins briefly, then sleeps.
  kThreads,
  /// Every rank a fiber (a user-space context with its own stack) on one
  /// worker thread per hardware thread: a waiting rank hands its worker to the
  /// next ready fiber, a switch some hundred times cheaper than an OS thread's.
  /// Results, errors, deadlock and timeout reports are the same as kThreads.
  /// The environment variable DTW_FIBER_WORKERS sets the number of worker
  /// threads (1 to 1024). A fiber runs on one worker from start to end, so
  /// thread_local state is shared by the fibers of a worker, and a rank that
  /// holds its worker without waiting in a Comm call (a sleep, a long
  /// computation) holds up the other fibers of that worker meanwhile. Each
  /// fiber's stack is 1 MiB of address space, backed only where touched.
  kFibers,
};

/// RankMode::kAuto picks fibers from this many ranks up...
inline constexpr int kFiberWorldFrom = 64;
/// ...when the world also has more than this many ranks per hardware thread.
inline constexpr int kFibersPerHardwareThread = 4;

/// Whether a threads-backend launch of `world_size` ranks in `mode` runs its
/// ranks as fibers (kAuto: the rule above, after DTW_RANK_MODE). Throws
/// InvalidArgument naming a DTW_RANK_MODE value it does not know.
bool ranks_run_as_fibers(int world_size, RankMode mode);

/// How a world is launched. `launch` checks every field first and raises
/// InvalidArgument naming it and its value.
struct LaunchOptions {
  /// "threads" (ranks are threads of this process) or, when built, "mpi"/"nccl".
  std::string backend = "threads";
  /// Where the ranks keep their memory and run their work. "" (the default)
  /// or "host": each backend's own place (the host on threads and mpi, one
  /// GPU per rank on nccl). "cuda": the threads backend with device buffers
  /// -- rank r's `Comm::exec()` is CUDA device r % (number of devices) with a
  /// stream of its own, so p ranks share one GPU when the machine has one;
  /// messages are device-to-device copies, local steps and reductions CUDA
  /// kernels on the rank's stream (docs/gpu.md, "Ranks that share one GPU").
  /// It checks the device path's correctness at any world size, not its
  /// speed: nccl, one rank per GPU, stays the performance path (and accepts
  /// "cuda" as what it does anyway). A string, like `backend`, because it is
  /// chosen the same way (a command-line word) and names a place as
  /// Exec::describe() does; a bool would have no room for another kind.
  /// launch refuses, naming the value: any other value; "cuda" in a build
  /// without CUDA, on a machine without a CUDA device, with a backend other
  /// than threads and nccl, or with fibers (RankMode::kFibers or
  /// DTW_RANK_MODE=fibers; kAuto then runs threads): the CUDA runtime's
  /// current device is per OS thread, which a worker's fibers would share,
  /// and a rank waiting for its stream would hold up its worker's fibers.
  std::string device;
  /// A rank blocked in one call for longer than this fails with TimeoutError
  /// (for a peer that never arrives; true deadlocks are detected at once).
  /// A rank that polls (Comm::test, a PendingCollective's test) for this long
  /// while none of its operations completes, and it posts none and makes no
  /// blocking call, is treated as blocked: TimeoutError naming what it polls
  /// for (on MPI the watchdog prints that and aborts the job, as for a blocked
  /// rank). A completion restarts the clock, so a long phase whose polls
  /// complete now and then is never stopped. Must be in (0, kMaxLaunchTimeout].
  std::chrono::milliseconds timeout{60'000};
  /// Record every communication call and phase for `Report::write_trace`.
  bool trace = false;
  /// Per-rank memory cap in bytes (0: none). Every rank's ledger
  /// (`comm.exec().ledger()`) refuses an allocation that would take it past
  /// the cap with OutOfMemory, naming the rank, the category and the bytes.
  std::int64_t memory_cap = 0;
  /// Threads or fibers for the ranks of a threads-backend world (RankMode).
  RankMode rank_mode = RankMode::kAuto;
  /// The bytes of data each rank will hold at its peak (its buffers, a
  /// model's share), when the caller knows it; 0: not given. The threads
  /// backend adds it to its estimate before launch (dtw/world_fit.h), which
  /// it then checks for every world, not only those of 64 ranks or more, and
  /// refuses a world whose ranks' data cannot fit with OutOfMemory naming the
  /// need, the room and the limit. A rank that still runs out of memory
  /// fails with OutOfMemory naming the rank, the world and the estimate. The
  /// other backends ignore it (each rank is a process or a GPU of its own).
  /// Must be >= 0.
  std::int64_t bytes_per_rank = 0;
};

/// One rank's failure as the report lists it.
struct RankError {
  /// World rank the error was raised on.
  int rank = -1;
  std::string kind;     ///< "InvalidArgument", "DeadlockError", "AbortedError", ...
  std::string message;  ///< the full what()
};

/// What a launch did: timing, traffic, trace and errors.
struct Report {
  /// Number of ranks launched.
  int world_size = 0;
  /// The backend that ran the launch ("threads", ...).
  std::string backend;
  /// Wall-clock time of the whole launch.
  double seconds = 0;
  /// What every world rank sent to every other: `traffic.bytes(src, dst)`,
  /// `traffic.messages(src, dst)`, `traffic.links()`. Only the links used are
  /// stored, so a launch of thousands of ranks does not hold a p×p matrix.
  TrafficMatrix traffic;
  /// Every rank's trace events (empty unless LaunchOptions::trace).
  std::vector<TraceEvent> trace;
  /// One entry per failed rank; ranks cancelled by another's failure show AbortedError.
  std::vector<RankError> errors;
  /// memory[r]: world rank r's ledger when its function had returned (peak and
  /// final bytes per category), on every backend and every process.
  std::vector<MemorySnapshot> memory;
  /// places[r]: where world rank r's memory lived and its work ran, as its
  /// `comm.exec().describe()` says ("host", "cuda:0"). Filled by the threads
  /// and nccl backends; empty from mpi (every rank there is on its host).
  std::vector<std::string> places;

  /// True when no rank failed.
  bool ok() const { return errors.empty(); }
  /// Total payload bytes sent by all ranks.
  std::int64_t total_bytes() const;
  /// The traffic matrix as a printable table (bytes, with K/M/G suffixes) for
  /// a world of up to 16 ranks; a larger world gets a summary of a dozen lines
  /// whatever its size: totals, the least, median and most bytes a rank sent
  /// and received, and the busiest links (`traffic` holds every link).
  std::string traffic_table() const;
  /// Per-rank memory as a printable table: the peak of each category, the
  /// peak of the total, what was still held at the end, and the cap. Beyond
  /// 16 ranks: the first 15, then the rank with the largest peak among the rest.
  std::string memory_table() const;
  /// Writes the trace as Chrome trace JSON; throws if tracing was off.
  void write_trace(const std::string& path) const;
};

/// The code every rank runs.
using RankFunction = std::function<void(Comm&)>;

/// Runs `fn` on `world_size` ranks and waits for all of them. If any rank
/// throws, the others' pending calls throw AbortedError, and launch rethrows
/// the first error (its type kept, its rank recorded in the message). An
/// empty `fn` is an InvalidArgument before any rank runs.
Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn);
/// launch with default options.
Report launch(int world_size, const RankFunction& fn);

/// A function every launch of this process passes each rank function through
/// before running it (on the launching thread, once per launch).
using LaunchWrapper = RankFunction (*)(const RankFunction& fn);
/// Installs `wrapper` for every later launch (nullptr removes it). Test
/// support uses it to carry a test's context onto the rank threads
/// (tests/support/dtw_test.h); other programs have no need for it.
void set_launch_wrapper(LaunchWrapper wrapper);

/// Throws InvalidArgument for anything launch would refuse in `options` for a
/// world of `world_size` ranks (an unknown backend, a timeout out of range, a
/// negative bytes_per_rank ...), without starting a rank: for a program that
/// checks its options before it prints or prepares anything. Launch makes the
/// same checks itself; what only the backend can know (a GPU, room for the
/// world) is left to it.
void check_launch_options(int world_size, const LaunchOptions& options);

/// Like launch, but returns the report with `errors` filled instead of
/// throwing (an empty `fn` still throws InvalidArgument before any rank runs).
Report launch_collecting(int world_size, const LaunchOptions& options, const RankFunction& fn);

}  // namespace dtw
