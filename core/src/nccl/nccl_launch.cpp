// Runs a world of rank threads, each driving its own GPU through one NCCL
// communicator, and gathers their traffic, trace and errors.
#include "nccl/nccl_launch.h"

#include <atomic>
#include <thread>

#include "dtw/config.h"
#include "dtw/cuda_check.h"
#include "backend_registry.h"
#include "nccl/nccl_comm.h"
#include "rank_threads.h"
#if DTW_HAVE_MPI
#include "dtw/mpi.h"
#endif

namespace dtw::nccl {
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

  auto world_failed = std::make_shared<std::atomic<bool>>(false);
  detail::RankRecorders recorders(world_size, options.trace, options.memory_cap);
  for (int r = 0; r < world_size; ++r) recorders.places[r] = "cuda:" + std::to_string(r % devices);
  detail::RankFailures failures;
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < world_size; ++r) {
      threads.emplace_back([&, r] {
        const std::exception_ptr failed = detail::run_recording(r, failures, [&] {
          auto ctx = std::make_shared<RankContext>(r % devices, options.timeout, world_failed,
                                                   recorders.ledgers[r]);
          ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
          config.blocking = 0;  // every wait polls, so a failed peer cannot hang this rank
          ncclComm_t raw = nullptr;
          DTW_NCCL_CHECK(ncclCommInitRankConfig(&raw, world_size, id, r, &config));
          NcclComm comm(ctx, raw, r, recorders.members, recorders.traffic[r],
                        recorders.tracers[r]);
          fn(comm);
          DTW_CHECK_ARG(ctx->abandoned == 0, "returned with " << ctx->abandoned
                                                 << " requests never waited for (call wait or wait_all)");
        });
        if (failed) world_failed->store(true);
      });
    }
  }  // jthreads join here
  return recorders.report("nccl", failures, first_error);
}

namespace {
// Registers the backend with launch() when a program links dtw::nccl (whose
// link option keeps this object: dtw_nccl_backend_link below).
[[maybe_unused]] const bool kRegistered =
    detail::register_backend({.name = "nccl", .launch = &nccl::launch});
}  // namespace

}  // namespace dtw::nccl

// The symbol dtw::nccl's link option names, so the linker keeps this object.
extern "C" void dtw_nccl_backend_link() {}
