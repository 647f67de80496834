// Runs a world of rank threads and gathers their traffic, trace and errors.
#include <mutex>
#include <system_error>
#include <thread>

#include "dtw/errors.h"
#include "dtw/world_fit.h"
#include "launch_backends.h"
#include "rank_threads.h"
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

}  // namespace

// Worlds this small fit anywhere this program runs: reading /proc on every
// one of the tests' thousands of small launches would only cost time.
constexpr int kCheckFitFrom = 64;

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error) {
  if (world_size >= kCheckFitFrom) check_threads_world_fits(world_size, machine_room());
  auto world = std::make_shared<World>(world_size, options.timeout);
  const detail::RankRecorders recorders(world_size, options.trace, options.memory_cap);
  detail::RankFailures failures;
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r) {
      try {
        threads.emplace_back([&, r] {
          ThreadsComm comm(world, 0, r, recorders.members, recorders.traffic[r],
                           recorders.tracers[r], Exec::host().with_ledger(recorders.ledgers[r]));
          run_rank(*world, comm, fn, failures);
        });
      } catch (const std::system_error& e) {
        // The machine refused a thread the estimate let through: the ranks
        // already running must not wait for ranks that will never start.
        OutOfMemory error("launch: could only start " + std::to_string(r) + " of " +
                          std::to_string(world_size) + " rank threads (" + e.what() +
                          "): use fewer ranks");
        error.set_rank(r);
        failures.add(r, error, std::make_exception_ptr(error));
        world->abort(r, error.kind());
        break;
      }
    }
  }  // jthreads join here
  return recorders.report("threads", failures, first_error);
}

}  // namespace dtw::threads
