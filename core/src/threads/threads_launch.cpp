// Runs a world of rank threads and gathers their traffic, trace and errors.
#include <mutex>
#include <thread>

#include "dtw/errors.h"
#include "launch_backends.h"
#include "threads/threads_comm.h"

namespace dtw::threads {
namespace {

struct Failures {
  std::mutex mu;
  std::vector<RankError> errors;
  std::exception_ptr first;        // the first failure that is not a consequence of another
  std::exception_ptr first_abort;  // used only if every failure is an AbortedError

  void add(int rank, const Error& e, std::exception_ptr ptr) {
    std::lock_guard lock(mu);
    errors.push_back({rank, e.kind(), e.what()});
    const bool aborted = dynamic_cast<const AbortedError*>(&e) != nullptr;
    if (aborted && !first_abort) first_abort = ptr;
    if (!aborted && !first) first = ptr;
  }
};

void run_rank(World& world, Comm& comm, const RankFunction& fn, Failures& failures) {
  const int rank = comm.world_rank();
  std::exception_ptr caught;
  try {
    fn(comm);
  } catch (Error& e) {
    e.set_rank(rank);
    caught = std::current_exception();
    failures.add(rank, e, caught);
  } catch (const std::exception& e) {
    Error wrapped(std::string("uncaught std::exception: ") + e.what());
    wrapped.set_rank(rank);
    caught = std::make_exception_ptr(wrapped);
    failures.add(rank, wrapped, caught);
  } catch (...) {
    Error wrapped("uncaught exception of unknown type");
    wrapped.set_rank(rank);
    caught = std::make_exception_ptr(wrapped);
    failures.add(rank, wrapped, caught);
  }
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
  const auto epoch = Tracer::Clock::now();
  std::vector<std::shared_ptr<Traffic>> traffic;
  std::vector<std::shared_ptr<Tracer>> tracers;
  std::vector<int> members(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    members[r] = r;
    traffic.push_back(std::make_shared<Traffic>(world_size));
    tracers.push_back(std::make_shared<Tracer>(r, options.trace, epoch));
  }
  Failures failures;
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < world_size; ++r) {
      threads.emplace_back([&, r] {
        ThreadsComm comm(world, 0, r, members, traffic[r], tracers[r]);
        run_rank(*world, comm, fn, failures);
      });
    }
  }  // jthreads join here
  Report report;
  report.world_size = world_size;
  report.backend = "threads";
  report.seconds = std::chrono::duration<double>(Tracer::Clock::now() - epoch).count();
  for (int r = 0; r < world_size; ++r) {
    report.bytes.push_back(traffic[r]->bytes_sent);
    report.messages.push_back(traffic[r]->messages_sent);
    const auto& events = tracers[r]->events();
    report.trace.insert(report.trace.end(), events.begin(), events.end());
  }
  report.errors = std::move(failures.errors);
  if (first_error) *first_error = failures.first ? failures.first : failures.first_abort;
  return report;
}

}  // namespace dtw::threads
