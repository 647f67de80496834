// The mpi backend's launch: this process runs the rank function as its MPI
// rank, then every process shares its piece of the report (traffic row, trace,
// errors), so each one returns, or throws, the same thing.
#include "mpi/mpi_launch.h"

#include <mpi.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>

#include "dtw/errors.h"
#include "dtw/mpi.h"
#include "backend_registry.h"
#include "launch_backends.h"
#include "mpi/mpi_comm.h"
#include "mpi/mpi_report.h"
#include "mpi/watchdog.h"

namespace dtw::mpi {
namespace {

struct Process {
  MPI_Comm launches = MPI_COMM_NULL;  // every launch's own traffic starts from here
  int rank = 0, size = 1;
  bool route = false;
};

Process& process() {
  static Process p;
  return p;
}

void finalize_at_exit() {
  Watchdog::instance().stop();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// DTW_MPI_WATCHDOG_SECONDS overrides the launch's own timeout. A value that
// is not a number of seconds in range is refused, naming it, by every process
// alike before any rank runs, never replaced by the launch's own timeout.
std::chrono::milliseconds watchdog_timeout(const LaunchOptions& options) {
  const char* env = std::getenv("DTW_MPI_WATCHDOG_SECONDS");
  if (env == nullptr) return options.timeout;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(env, &end);
  const double most = std::chrono::duration<double>(kMaxLaunchTimeout).count();
  DTW_CHECK_ARG(*env != '\0' && end != nullptr && *end == '\0' && errno == 0 &&
                    std::isfinite(s) && s > 0 && s <= most,
                "DTW_MPI_WATCHDOG_SECONDS='" << env << "' is not a number of seconds in (0, "
                                             << most << "] (unset it for the launch's timeout, "
                                             << options.timeout.count() << " ms)");
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
}

void record(PartialReport& part, int rank, const Error& e) {
  part.errors.push_back({rank, e.kind(), e.what()});
  part.bare_messages.push_back(e.message());
}

// Runs `fn` on this process as rank `me` of a `world`-rank launch.
std::shared_ptr<Job> run_rank(int world, const LaunchOptions& options,
                              std::chrono::milliseconds watchdog, const RankFunction& fn,
                              MPI_Comm job, PartialReport& part, std::exception_ptr& own_error) {
  const int me = process().rank;
  auto state = std::make_shared<Job>(job, me);
  auto traffic = std::make_shared<Traffic>(world);
  // The ranks start their clocks together, so trace timestamps line up.
  MPI_Barrier(job);
  auto tracer = std::make_shared<Tracer>(me, options.trace, Tracer::Clock::now());
  std::vector<int> members(static_cast<std::size_t>(world));
  std::iota(members.begin(), members.end(), 0);
  auto ledger = std::make_shared<MemoryLedger>(me, options.memory_cap);
  Watchdog::instance().arm(me, world, watchdog);
  {
    MpiComm comm(state, job, me, members, traffic, tracer, Exec::host().with_ledger(ledger));
    try {
      fn(comm);
      if (!state->abandoned().empty()) {
        std::string list;
        for (const std::string& s : state->abandoned()) list += s;
        DTW_CHECK_ARG(false, "returned with requests never waited for (call wait or wait_all):"
                                 << list);
      }
    } catch (Error& e) {
      e.set_rank(me);
      record(part, me, e);
      own_error = std::current_exception();
    } catch (const std::bad_alloc& e) {
      // As on threads (rank_threads.h): out of memory names the job, not a bug.
      OutOfMemory wrapped(std::string("out of memory (") + e.what() + ") in a process of an mpi " +
                          "job of " + std::to_string(world) +
                          " ranks: use fewer ranks a machine or less data a rank");
      wrapped.set_rank(me);
      record(part, me, wrapped);
      own_error = std::make_exception_ptr(wrapped);
    } catch (const std::exception& e) {
      Error wrapped(std::string("uncaught std::exception: ") + e.what());
      wrapped.set_rank(me);
      record(part, me, wrapped);
      own_error = std::make_exception_ptr(wrapped);
    } catch (...) {
      Error wrapped("uncaught exception of unknown type");
      wrapped.set_rank(me);
      record(part, me, wrapped);
      own_error = std::make_exception_ptr(wrapped);
    }
    if (own_error) state->announce_failure();
  }
  Watchdog::instance().disarm();
  part.add_rank(me, *traffic);
  part.trace = tracer->events();
  part.memory.push_back(ledger->snapshot());
  return state;
}

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // The watchdog thread may call MPI_Abort while the rank is inside MPI.
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      std::atexit(finalize_at_exit);
    }
    Process& p = process();
    MPI_Comm_dup(MPI_COMM_WORLD, &p.launches);
    MPI_Comm_rank(p.launches, &p.rank);
    MPI_Comm_size(p.launches, &p.size);
    // The watchdogs' own communicator: on it, a rank whose watchdog fires
    // asks every other rank for its state, so that one report covers the job.
    MPI_Comm watch = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &watch);
    MPI_Comm_set_errhandler(watch, MPI_ERRORS_RETURN);
    Watchdog::instance().set_channel(watch);
  });
}

bool inside_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

int world_rank() {
  init();
  return process().rank;
}

int world_size() {
  init();
  return process().size;
}

MPI_Comm launches_comm() {
  init();
  return process().launches;
}

std::unique_ptr<Comm> process_comm() {
  init();
  MPI_Comm all = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(process().launches, &all), "MPI_Comm_dup", process().rank);
  const int rank = process().rank, size = process().size;
  std::vector<int> members(static_cast<std::size_t>(size));
  std::iota(members.begin(), members.end(), 0);
  // The communicator owns `all` and its Job; both are freed with it.
  return std::make_unique<MpiComm>(std::make_shared<Job>(all, rank), all, rank, std::move(members),
                                   std::make_shared<Traffic>(size),
                                   std::make_shared<Tracer>(rank, false, Tracer::Clock::now()),
                                   Exec::host());
}

void set_route_launches(bool on) { process().route = on; }
bool route_launches() { return process().route; }

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error) {
  init();
  const Process& p = process();
  const bool routed = options.backend != "mpi";
  const int world = world_size == 0 ? p.size : world_size;
  const bool on_threads = routed && world > p.size;
  DTW_CHECK_ARG(on_threads || world <= p.size,
                "launch on backend mpi: world size " << world << " but this job has " << p.size
                                                     << " MPI process(es); start it with "
                                                        "`mpirun -np "
                                                     << world
                                                     << " ...` or `dtw run ... --backend mpi "
                                                        "--ranks "
                                                     << world << "`");
  if (on_threads) {
    // Every process runs the same threads launch itself, so what a test
    // checks after the launch (often results its rank threads left in shared
    // variables) holds on every process alike.
    return threads::launch(world, options, fn, first_error);
  }
  const std::chrono::milliseconds watchdog = watchdog_timeout(options);  // before any collective
  const auto start = Tracer::Clock::now();
  PartialReport part;
  std::exception_ptr own_error;
  std::shared_ptr<Job> job_state;  // its communicators live until every process knows the outcome
  MPI_Comm job = MPI_COMM_NULL;
  MPI_Comm_split(p.launches, p.rank < world ? 0 : MPI_UNDEFINED, p.rank, &job);
  if (job != MPI_COMM_NULL) job_state = run_rank(world, options, watchdog, fn, job, part, own_error);

  return merge_parts("mpi", world, p.rank, start, part, std::move(job_state), own_error,
                     first_error);
}

namespace {
// Registers the backend with launch() when a program links dtw::mpi (whose
// link option keeps this object: dtw_mpi_backend_link below).
[[maybe_unused]] const bool kRegistered = detail::register_backend({
    .name = "mpi",
    .launch = &mpi::launch,
    .takes_job_size = true,
    .claims = [](const LaunchOptions& options) { return route_launches() && options.backend == "threads"; },
    .check_options = [](const LaunchOptions& options) { (void)watchdog_timeout(options); },
    .process_comm = [] { return process_comm(); },
});
}  // namespace

}  // namespace dtw::mpi

// The symbol dtw::mpi's link option names, so the linker keeps this object.
extern "C" void dtw_mpi_backend_link() {}
