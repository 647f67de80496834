// The nccl backend across machines: one process per GPU, started by mpirun.
// MPI does only the bootstrap and the bookkeeping -- rank 0's ncclUniqueId goes
// to everyone by MPI_Bcast, failures travel on the mpi backend's abort channel
// (mpi::Job), and the processes swap their pieces of the report at the end --
// while every message of the rank function goes through NCCL.
#include <mpi.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <thread>

#include "dtw/cuda_check.h"
#include "dtw/mpi.h"
#include "mpi/mpi_job.h"
#include "mpi/mpi_report.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_launch.h"

namespace dtw::nccl {
namespace {

// A private copy of MPI_COMM_WORLD, so the bootstrap's messages never meet
// those of the mpi backend or of the user's own MPI code.
MPI_Comm launches() {
  static MPI_Comm comm = [] {
    MPI_Comm c = MPI_COMM_NULL;
    mpi::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup", mpi::world_rank());
    return c;
  }();
  return comm;
}

// GPU of this process: its rank among the processes of its own machine.
int local_device(MPI_Comm job, int rank) {
  MPI_Comm node = MPI_COMM_NULL;
  mpi::check_mpi(MPI_Comm_split_type(job, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                 "MPI_Comm_split_type", rank);
  int local = 0, on_node = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &on_node);
  MPI_Comm_free(&node);
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess) cudaGetLastError();
  DTW_CHECK(rc == cudaSuccess && devices > 0, CudaError,
            "rank " << rank
                    << ": launch: backend 'nccl' under mpirun: no CUDA device on this machine ("
                    << (rc != cudaSuccess ? cudaGetErrorString(rc) : "cudaGetDeviceCount found 0")
                    << ")");
  DTW_CHECK_ARG(on_node <= devices,
                "rank " << rank << ": launch: backend 'nccl' runs one process per GPU, "
                        << "but " << on_node << " processes share a machine with " << devices
                        << " GPU(s): start fewer per host (mpirun -H host:" << devices << ")");
  return local;
}

// Watches the abort channel while the rank function runs, and turns another
// process's failure into this process's world_failed flag, which every NCCL
// wait polls: so a failed peer ends this rank's waits with AbortedError.
class AbortWatch {
 public:
  AbortWatch(mpi::Job& job, std::atomic<bool>& failed) : job_(job), failed_(failed) {
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested() && !failed_.load()) {
        {
          std::lock_guard lock(mu_);
          if (job_.poll_aborted()) failed_.store(true);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~AbortWatch() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  void announce_failure() {
    std::lock_guard lock(mu_);
    job_.announce_failure();
  }

 private:
  mpi::Job& job_;
  std::atomic<bool>& failed_;
  std::mutex mu_;
  std::jthread thread_;
};

void record(mpi::PartialReport& part, int rank, const Error& e) {
  part.errors.push_back({rank, e.kind(), e.what()});
  part.bare_messages.push_back(e.message());
}

// Runs `fn` as rank `me` of the launch on this process's GPU.
std::shared_ptr<mpi::Job> run_rank(int world, const LaunchOptions& options, const RankFunction& fn,
                                   MPI_Comm job, mpi::PartialReport& part,
                                   std::exception_ptr& own_error) {
  int me = 0;
  MPI_Comm_rank(job, &me);
  auto state = std::make_shared<mpi::Job>(job, me);
  auto traffic = std::make_shared<Traffic>(world);
  MPI_Barrier(job);  // the clocks start together, so trace timestamps line up
  auto tracer = std::make_shared<Tracer>(me, options.trace, Tracer::Clock::now());
  auto world_failed = std::make_shared<std::atomic<bool>>(false);
  auto ledger = std::make_shared<MemoryLedger>(me, options.memory_cap);
  std::vector<int> members(static_cast<std::size_t>(world));
  std::iota(members.begin(), members.end(), 0);
  const auto fail = [&](const Error& e, std::exception_ptr ptr) {
    record(part, me, e);
    own_error = ptr;
    world_failed->store(true);
  };
  {
    AbortWatch watch(*state, *world_failed);
    try {
      // Every process picks its GPU and rank 0 makes the id before anyone may
      // fail, and all agree that this worked: so a machine without a GPU fails
      // the launch at once instead of leaving the others in NCCL's bootstrap.
      int device = -1;
      ncclUniqueId id{};
      std::exception_ptr setup_error;
      try {
        device = local_device(job, me);
        if (me == 0) DTW_NCCL_CHECK(ncclGetUniqueId(&id));
      } catch (...) {
        setup_error = std::current_exception();
      }
      int ok = setup_error ? 0 : 1, all_ok = 0;
      mpi::check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, job), "MPI_Allreduce", me);
      if (setup_error) std::rethrow_exception(setup_error);
      DTW_CHECK(all_ok == 1, AbortedError,
                "rank " << me << ": launch cancelled: another process could not set up its GPU");
      mpi::check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, job), "MPI_Bcast", me);
      auto ctx = std::make_shared<RankContext>(device, options.timeout, world_failed, ledger);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // every wait polls, so a failed peer cannot hang this rank
      ncclComm_t raw = nullptr;
      DTW_NCCL_CHECK(ncclCommInitRankConfig(&raw, world, id, me, &config));
      NcclComm comm(ctx, raw, me, members, traffic, tracer);
      try {
        fn(comm);
        DTW_CHECK_ARG(ctx->abandoned == 0,
                      "returned with " << ctx->abandoned
                                       << " requests never waited for (call wait or wait_all)");
      } catch (Error& e) {
        // Tell the others before this communicator is torn down (aborted):
        // they then stop waiting for this rank at once.
        e.set_rank(me);
        fail(e, std::current_exception());
        watch.announce_failure();
      }
    } catch (Error& e) {
      e.set_rank(me);
      if (!own_error) fail(e, std::current_exception());
    } catch (const std::exception& e) {
      Error wrapped(std::string("uncaught std::exception: ") + e.what());
      wrapped.set_rank(me);
      fail(wrapped, std::make_exception_ptr(wrapped));
    } catch (...) {
      Error wrapped("uncaught exception of unknown type");
      wrapped.set_rank(me);
      fail(wrapped, std::make_exception_ptr(wrapped));
    }
    if (own_error) watch.announce_failure();
  }
  part.add_rank(me, *traffic);
  part.trace = tracer->events();
  part.memory.push_back(ledger->snapshot());
  return state;
}

}  // namespace

Report launch_mpi(int world_size, const LaunchOptions& options, const RankFunction& fn,
                  std::exception_ptr* first_error) {
  mpi::init();
  const int rank = mpi::world_rank(), procs = mpi::world_size();
  DTW_CHECK_ARG(world_size <= procs,
                "launch: backend 'nccl' under mpirun runs one process per rank: "
                "world size "
                    << world_size << " but this job has " << procs
                    << " process(es); start it with `mpirun -np " << world_size << " ...`");
  const auto start = Tracer::Clock::now();
  mpi::PartialReport part;
  std::exception_ptr own_error;
  std::shared_ptr<mpi::Job> job_state;
  MPI_Comm job = MPI_COMM_NULL;
  MPI_Comm_split(launches(), rank < world_size ? 0 : MPI_UNDEFINED, rank, &job);
  if (job != MPI_COMM_NULL) {
    job_state = run_rank(world_size, options, fn, job, part, own_error);
    job_state->retire(job);
  }

  // Every process (those that sat out too) merges every piece of the report.
  return mpi::merge_parts("nccl", world_size, rank, start, part, std::move(job_state), own_error,
                          first_error);
}

}  // namespace dtw::nccl
