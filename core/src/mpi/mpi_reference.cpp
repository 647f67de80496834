// The mpi backend's reference collectives: MPI's own implementations (OpenMPI's
// tuned algorithms), which is what the learner's algorithms are measured
// against. Arguments are checked here first, and the ranks agree on count and
// root with one small allreduce, because MPI given mismatched counts hangs or
// corrupts memory instead of reporting.
#include <climits>
#include <memory>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "mpi/mpi_comm.h"
#include "mpi/watchdog.h"

namespace dtw::mpi {
namespace {

MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::kByte: return MPI_BYTE;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kAvg: return MPI_SUM;  // divided afterwards
  }
  return MPI_SUM;
}

// kAvg: the sum divided by the group size (integer division for integers).
void finish_avg(ReduceOp op, Buffer data, int p) {
  if (op == ReduceOp::kAvg) kernels::divide(data, p);
}

int as_int(int rank, const char* what, std::int64_t count) {
  DTW_CHECK_ARG(count >= 0 && count <= INT_MAX, "rank " << rank << ": reference " << what
                                                        << " with count " << count
                                                        << ": must be in [0, " << INT_MAX << "]");
  return static_cast<int>(count);
}

void check_root(int rank, int size, const char* what, int root) {
  DTW_CHECK_ARG(root >= 0 && root < size, "rank " << rank << ": reference " << what << " with root "
                                                  << root << ": root out of range [0, " << size
                                                  << ")");
}

void check_types(int rank, const char* what, DataType in, DataType out, bool reduces) {
  DTW_CHECK_ARG(in == out, "rank " << rank << ": reference " << what << ": input is "
                                   << name_of(in) << " but output is " << name_of(out));
  DTW_CHECK_ARG(!reduces || in != DataType::kByte,
                "rank " << rank << ": reference " << what << ": cannot reduce raw bytes");
}

}  // namespace

// Every rank must pass the same count (and root): compare min and max at once.
void MpiComm::agree(const char* what, std::int64_t count, int root) {
  Watchdog::instance().note_collective(what);
  if (job_->poll_aborted()) job_->throw_aborted(what);
  // Heap memory: if the wait is aborted the collective may still write here
  // later, so the buffer is then left to leak rather than freed.
  auto buf = std::make_unique<std::int64_t[]>(8);
  std::int64_t* local = buf.get();
  std::int64_t* global = buf.get() + 4;
  local[0] = count;
  local[1] = -count;
  local[2] = root;
  local[3] = -root;
  MPI_Request req;
  check_mpi(MPI_Iallreduce(local, global, 4, MPI_INT64_T, MPI_MAX, internal_, &req),
            "MPI_Iallreduce", world_rank());
  try {
    wait_collective(req, what);
  } catch (const AbortedError&) {
    (void)buf.release();
    throw;
  }
  DTW_CHECK_ARG(global[0] == -global[1] && global[2] == -global[3],
                "rank " << rank() << ": reference " << what << ": the ranks disagree: counts range "
                        << -global[1] << ".." << global[0] << ", roots " << -global[3] << ".."
                        << global[2] << " (this rank: count " << count << ", root " << root << ")");
}

void MpiComm::run_collective(const char* what, int rc) { check_mpi(rc, what, world_rank()); }

void MpiComm::reference_allreduce(Buffer data, ReduceOp op) {
  const int n = as_int(rank(), "allreduce", data.count);
  check_types(rank(), "allreduce", data.type, data.type, true);
  agree("allreduce", n, -1);
  const BlockedScope blocked("MPI_Allreduce");
  run_collective("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, data.data, n, mpi_type(data.type),
                                                mpi_op(op), user_));
  finish_avg(op, data, size());
}

void MpiComm::reference_broadcast(Buffer data, int root) {
  check_root(rank(), size(), "broadcast", root);
  const int n = as_int(rank(), "broadcast", data.count);
  agree("broadcast", n, root);
  const BlockedScope blocked("MPI_Bcast");
  run_collective("MPI_Bcast", MPI_Bcast(data.data, n, mpi_type(data.type), root, user_));
}

void MpiComm::reference_reduce(Buffer data, ReduceOp op, int root) {
  check_root(rank(), size(), "reduce", root);
  const int n = as_int(rank(), "reduce", data.count);
  check_types(rank(), "reduce", data.type, data.type, true);
  agree("reduce", n, root);
  const BlockedScope blocked("MPI_Reduce");
  const void* send = rank() == root ? MPI_IN_PLACE : data.data;
  run_collective("MPI_Reduce", MPI_Reduce(send, data.data, n, mpi_type(data.type), mpi_op(op),
                                          root, user_));
  if (rank() == root) finish_avg(op, data, size());
}

void MpiComm::reference_allgather(ConstBuffer in, Buffer out) {
  const int n = as_int(rank(), "allgather", in.count);
  check_types(rank(), "allgather", in.type, out.type, false);
  DTW_CHECK_ARG(out.count == size() * in.count,
                "rank " << rank() << ": reference allgather: output holds " << out.count
                        << " elements, expected size() * input = " << size() << " * " << in.count);
  agree("allgather", n, -1);
  const BlockedScope blocked("MPI_Allgather");
  run_collective("MPI_Allgather", MPI_Allgather(in.data, n, mpi_type(in.type), out.data, n,
                                                mpi_type(out.type), user_));
}

void MpiComm::reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  as_int(rank(), "reduce_scatter", in.count);
  check_types(rank(), "reduce_scatter", in.type, out.type, true);
  const Chunks chunks(in.count, size());
  DTW_CHECK_ARG(out.count == chunks.size(rank()),
                "rank " << rank() << ": reference reduce_scatter of " << in.count
                        << " elements: output holds " << out.count << " elements, expected chunk "
                        << rank() << " of " << size() << " = " << chunks.size(rank()));
  agree("reduce_scatter", in.count, -1);
  std::vector<int> counts(static_cast<std::size_t>(size()));
  for (int r = 0; r < size(); ++r) counts[static_cast<std::size_t>(r)] = static_cast<int>(chunks.size(r));
  const BlockedScope blocked("MPI_Reduce_scatter");
  run_collective("MPI_Reduce_scatter",
                 MPI_Reduce_scatter(in.data, out.data, counts.data(), mpi_type(in.type),
                                    mpi_op(op), user_));
  finish_avg(op, out, size());
}

void MpiComm::reference_alltoall(ConstBuffer in, Buffer out) {
  as_int(rank(), "alltoall", in.count);
  check_types(rank(), "alltoall", in.type, out.type, false);
  DTW_CHECK_ARG(in.count % size() == 0,
                "rank " << rank() << ": reference alltoall of " << in.count
                        << " elements: not divisible by the group size " << size());
  DTW_CHECK_ARG(out.count == in.count, "rank " << rank() << ": reference alltoall: output holds "
                                               << out.count << " elements, input " << in.count);
  agree("alltoall", in.count, -1);
  const int block = static_cast<int>(in.count / size());
  const BlockedScope blocked("MPI_Alltoall");
  run_collective("MPI_Alltoall", MPI_Alltoall(in.data, block, mpi_type(in.type), out.data, block,
                                              mpi_type(out.type), user_));
}

void MpiComm::reference_gather(ConstBuffer in, Buffer out, int root) {
  check_root(rank(), size(), "gather", root);
  const int n = as_int(rank(), "gather", in.count);
  if (rank() == root) {
    check_types(rank(), "gather", in.type, out.type, false);
    DTW_CHECK_ARG(out.count == size() * in.count,
                  "rank " << rank() << ": reference gather: output holds " << out.count
                          << " elements, expected size() * input = " << size() << " * "
                          << in.count);
  }
  agree("gather", n, root);
  const BlockedScope blocked("MPI_Gather");
  run_collective("MPI_Gather", MPI_Gather(in.data, n, mpi_type(in.type), out.data, n,
                                          mpi_type(in.type), root, user_));
}

void MpiComm::reference_scatter(ConstBuffer in, Buffer out, int root) {
  check_root(rank(), size(), "scatter", root);
  const int n = as_int(rank(), "scatter", out.count);
  if (rank() == root) {
    check_types(rank(), "scatter", in.type, out.type, false);
    DTW_CHECK_ARG(in.count == size() * out.count,
                  "rank " << rank() << ": reference scatter: input holds " << in.count
                          << " elements, expected size() * output = " << size() << " * "
                          << out.count);
  }
  agree("scatter", n, root);
  const BlockedScope blocked("MPI_Scatter");
  run_collective("MPI_Scatter", MPI_Scatter(in.data, n, mpi_type(out.type), out.data, n,
                                            mpi_type(out.type), root, user_));
}

}  // namespace dtw::mpi
