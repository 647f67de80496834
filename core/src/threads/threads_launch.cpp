// Runs a world of rank threads and gathers their traffic, trace and errors.
#include <mutex>
#include <thread>

#include "dtw/errors.h"
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

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error) {
  auto world = std::make_shared<World>(world_size, options.timeout);
  const detail::RankRecorders recorders(world_size, options.trace, options.memory_cap);
  detail::RankFailures failures;
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < world_size; ++r) {
      threads.emplace_back([&, r] {
        ThreadsComm comm(world, 0, r, recorders.members, recorders.traffic[r],
                         recorders.tracers[r], Exec::host().with_ledger(recorders.ledgers[r]));
        run_rank(*world, comm, fn, failures);
      });
    }
  }  // jthreads join here
  return recorders.report("threads", failures, first_error);
}

}  // namespace dtw::threads
