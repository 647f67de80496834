// Runs a world of rank threads, each driving its own GPU through one NCCL
// communicator, and gathers their traffic, trace and errors.
#include "nccl/nccl_launch.h"

#include <mutex>
#include <string>
#include <thread>

#include "dtw/config.h"
#include "dtw/cuda_check.h"
#include "nccl/nccl_comm.h"
#if DTW_HAVE_MPI
#include "dtw/mpi.h"
#endif

namespace dtw::nccl {
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

// Turns whatever `body` throws into a RankError with the rank recorded.
template <class F>
void guarded(int rank, Failures& failures, std::atomic<bool>& world_failed, F&& body) {
  try {
    body();
    return;
  } catch (Error& e) {
    e.set_rank(rank);
    failures.add(rank, e, std::current_exception());
  } catch (const std::exception& e) {
    Error wrapped(std::string("uncaught std::exception: ") + e.what());
    wrapped.set_rank(rank);
    failures.add(rank, wrapped, std::make_exception_ptr(wrapped));
  } catch (...) {
    Error wrapped("uncaught exception of unknown type");
    wrapped.set_rank(rank);
    failures.add(rank, wrapped, std::make_exception_ptr(wrapped));
  }
  world_failed.store(true);
}

}  // namespace

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error) {
#if DTW_HAVE_MPI
  // Under mpirun with several processes every process is one rank on its own GPU.
  if (mpi::inside_mpirun() && mpi::world_size() > 1)
    return launch_mpi(world_size, options, fn, first_error);
#endif
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess) cudaGetLastError();
  DTW_CHECK(rc == cudaSuccess && devices > 0, CudaError,
            "launch: backend 'nccl': no CUDA device ("
                << (rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0") << ")");
  DTW_CHECK_ARG(world_size <= devices, "launch: backend 'nccl' runs one rank per GPU: world size "
                                           << world_size << " needs " << world_size
                                           << " GPUs, this machine has " << devices);
  ncclUniqueId id{};
  DTW_NCCL_CHECK(ncclGetUniqueId(&id));

  const auto epoch = Tracer::Clock::now();
  auto world_failed = std::make_shared<std::atomic<bool>>(false);
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
        guarded(r, failures, *world_failed, [&] {
          auto ctx = std::make_shared<RankContext>(r % devices, options.timeout, world_failed);
          ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
          config.blocking = 0;  // every wait polls, so a failed peer cannot hang this rank
          ncclComm_t raw = nullptr;
          DTW_NCCL_CHECK(ncclCommInitRankConfig(&raw, world_size, id, r, &config));
          NcclComm comm(ctx, raw, r, members, traffic[r], tracers[r]);
          fn(comm);
          DTW_CHECK_ARG(ctx->abandoned == 0, "returned with " << ctx->abandoned
                                                 << " requests never waited for (call wait or wait_all)");
        });
      });
    }
  }  // jthreads join here
  Report report;
  report.world_size = world_size;
  report.backend = "nccl";
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

}  // namespace dtw::nccl
