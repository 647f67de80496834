#pragma once
// The nccl backend's launch: one thread per rank, one GPU per rank.
#include <exception>

#include "dtw/launch.h"

namespace dtw::nccl {
/// Runs `fn` on `world_size` ranks, rank r on GPU r. Throws CudaError when the
/// machine has no CUDA device and InvalidArgument when it has fewer GPUs than
/// ranks; rank failures go into the report (and `first_error`, when given).
Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn,
              std::exception_ptr* first_error);

/// The same with one process per GPU under mpirun (builds with MPI only): the
/// first `world_size` processes are the ranks, each on the GPU given by its
/// rank among the processes of its machine; rank 0's ncclUniqueId reaches the
/// others by MPI_Bcast. Every process gets the same report and first error.
/// `launch` comes here by itself when it runs inside a multi-process mpirun job.
Report launch_mpi(int world_size, const LaunchOptions& options, const RankFunction& fn,
                  std::exception_ptr* first_error);
}  // namespace dtw::nccl
