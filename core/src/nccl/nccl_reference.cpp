// The nccl backend's reference collectives: NCCL's own, on this rank's stream.
// All-to-all, gather and scatter have no NCCL collective; they are grouped
// ncclSend/ncclRecv, the way NCCL's documentation builds them. Buffers must be
// device memory (unlike point-to-point, nothing is staged): a host pointer is
// an InvalidArgument here rather than an illegal address inside NCCL.
#include <cstddef>

#include "dtw/chunks.h"
#include "dtw/cuda_check.h"
#include "nccl/nccl_comm.h"

namespace dtw::nccl {
namespace {

void* at(void* base, std::int64_t elements, DataType type) {
  return static_cast<std::byte*>(base) + elements * static_cast<std::int64_t>(size_of(type));
}
const void* at(const void* base, std::int64_t elements, DataType type) {
  return static_cast<const std::byte*>(base) + elements * static_cast<std::int64_t>(size_of(type));
}
std::size_t n(std::int64_t count) { return static_cast<std::size_t>(count); }

}  // namespace

// Every reference collective quiesces first (launches what point-to-point is
// queued and waits until NCCL accepts a new call), then calls NCCL, then
// settles and syncs here.
void NcclComm::run_collective(const char* what, ncclResult_t rc) {
  DTW_NCCL_CHECK(rc);
  sync(what);
}

void NcclComm::check_same_type(ConstBuffer in, Buffer out, const char* what) const {
  DTW_CHECK_ARG(in.type == out.type, "rank " << rank() << ": reference " << what << ": input is "
                                             << name_of(in.type) << ", output " << name_of(out.type));
  DTW_CHECK_ARG(in.count >= 0 && out.count >= 0, "rank " << rank() << ": reference " << what
                                                         << ": negative count " << in.count << "/"
                                                         << out.count);
}

namespace {
void check_root(int rank, int size, const char* what, int root) {
  DTW_CHECK_ARG(root >= 0 && root < size, "rank " << rank << ": reference " << what << " with root "
                                                  << root << ": root out of range [0, " << size << ")");
}
void check_reducible(int rank, const char* what, Buffer data) {
  DTW_CHECK_ARG(data.count >= 0, "rank " << rank << ": reference " << what << " with count " << data.count);
  DTW_CHECK_ARG(data.type != DataType::kByte, "rank " << rank << ": reference " << what
                                                      << ": cannot reduce raw bytes");
}
}  // namespace

void NcclComm::reference_allreduce(Buffer data, ReduceOp op) {
  check_type(data.type, "reference allreduce");
  check_op(op, "reference allreduce");
  check_reducible(rank(), "allreduce", data);
  check_device_memory(data.data, data.bytes(), "reference allreduce");
  verify_collective({"allreduce", data.count, data.type, static_cast<int>(op), -1});
  quiesce("reference allreduce");
  run_collective("reference allreduce", ncclAllReduce(data.data, data.data, n(data.count), nccl_type(data.type),
                                                      nccl_op(op), comm_, ctx_->stream));
}

void NcclComm::reference_broadcast(Buffer data, int root) {
  check_type(data.type, "reference broadcast");
  check_root(rank(), size(), "broadcast", root);
  check_device_memory(data.data, data.bytes(), "reference broadcast");
  verify_collective({"broadcast", data.count, data.type, -1, root});
  quiesce("reference broadcast");
  run_collective("reference broadcast", ncclBroadcast(data.data, data.data, n(data.count), nccl_type(data.type),
                                                      root, comm_, ctx_->stream));
}

void NcclComm::reference_reduce(Buffer data, ReduceOp op, int root) {
  check_type(data.type, "reference reduce");
  check_op(op, "reference reduce");
  check_root(rank(), size(), "reduce", root);
  check_reducible(rank(), "reduce", data);
  check_device_memory(data.data, data.bytes(), "reference reduce");
  verify_collective({"reduce", data.count, data.type, static_cast<int>(op), root});
  quiesce("reference reduce");
  run_collective("reference reduce", ncclReduce(data.data, data.data, n(data.count), nccl_type(data.type),
                                                nccl_op(op), root, comm_, ctx_->stream));
}

void NcclComm::reference_allgather(ConstBuffer in, Buffer out) {
  check_type(in.type, "reference allgather");
  check_same_type(in, out, "allgather");
  DTW_CHECK_EQ(out.count, size() * in.count, "rank " << rank() << ": reference allgather: output size");
  check_device_memory(in.data, in.bytes(), "reference allgather");
  check_device_memory(out.data, out.bytes(), "reference allgather");
  verify_collective({"allgather", in.count, in.type, -1, -1});
  quiesce("reference allgather");
  run_collective("reference allgather", ncclAllGather(in.data, out.data, n(in.count), nccl_type(in.type),
                                                      comm_, ctx_->stream));
}

void NcclComm::reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  check_type(in.type, "reference reduce_scatter");
  check_op(op, "reference reduce_scatter");
  check_same_type(in, out, "reduce_scatter");
  check_reducible(rank(), "reduce_scatter", out);
  const Chunks chunks(in.count, size());
  DTW_CHECK_EQ(out.count, chunks.size(rank()), "rank " << rank() << ": reference reduce_scatter: output size");
  check_device_memory(in.data, in.bytes(), "reference reduce_scatter");
  check_device_memory(out.data, out.bytes(), "reference reduce_scatter");
  verify_collective({"reduce_scatter", in.count, in.type, static_cast<int>(op), -1});
  quiesce("reference reduce_scatter");
  if (in.count % size() == 0) {
    run_collective("reference reduce_scatter",
                   ncclReduceScatter(in.data, out.data, n(out.count), nccl_type(in.type), nccl_op(op),
                                     comm_, ctx_->stream));
    return;
  }
  // Uneven chunks (ncclReduceScatter needs equal ones): one ncclReduce per
  // chunk to its owner, all in one group.
  DTW_NCCL_CHECK(ncclGroupStart());
  for (int c = 0; c < size(); ++c)
    DTW_NCCL_CHECK(ncclReduce(at(in.data, chunks.offset(c), in.type), out.data, n(chunks.size(c)),
                              nccl_type(in.type), nccl_op(op), c, comm_, ctx_->stream));
  run_collective("reference reduce_scatter", ncclGroupEnd());
}

void NcclComm::reference_alltoall(ConstBuffer in, Buffer out) {
  check_type(in.type, "reference alltoall");
  check_same_type(in, out, "alltoall");
  DTW_CHECK_EQ(in.count % size(), 0, "rank " << rank() << ": reference alltoall: input not divisible by size");
  DTW_CHECK_EQ(out.count, in.count, "rank " << rank() << ": reference alltoall: output size");
  check_device_memory(in.data, in.bytes(), "reference alltoall");
  check_device_memory(out.data, out.bytes(), "reference alltoall");
  const std::int64_t block = in.count / size();
  verify_collective({"alltoall", in.count, in.type, -1, -1});
  quiesce("reference alltoall");
  DTW_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size() && block > 0; ++r) {
    DTW_NCCL_CHECK(ncclSend(at(in.data, r * block, in.type), n(block), nccl_type(in.type), r, comm_, ctx_->stream));
    DTW_NCCL_CHECK(ncclRecv(at(out.data, r * block, out.type), n(block), nccl_type(in.type), r, comm_, ctx_->stream));
  }
  run_collective("reference alltoall", ncclGroupEnd());
}

void NcclComm::reference_gather(ConstBuffer in, Buffer out, int root) {
  check_type(in.type, "reference gather");
  check_root(rank(), size(), "gather", root);
  if (rank() == root) {
    check_same_type(in, out, "gather");
    DTW_CHECK_EQ(out.count, size() * in.count, "rank " << rank() << ": reference gather: output size");
    check_device_memory(out.data, out.bytes(), "reference gather");
  }
  check_device_memory(in.data, in.bytes(), "reference gather");
  verify_collective({"gather", in.count, in.type, -1, root});
  quiesce("reference gather");
  DTW_NCCL_CHECK(ncclGroupStart());
  if (in.count > 0) {
    DTW_NCCL_CHECK(ncclSend(in.data, n(in.count), nccl_type(in.type), root, comm_, ctx_->stream));
    if (rank() == root)
      for (int r = 0; r < size(); ++r)
        DTW_NCCL_CHECK(ncclRecv(at(out.data, r * in.count, out.type), n(in.count), nccl_type(in.type), r,
                                comm_, ctx_->stream));
  }
  run_collective("reference gather", ncclGroupEnd());
}

void NcclComm::reference_scatter(ConstBuffer in, Buffer out, int root) {
  check_type(in.type, "reference scatter");
  check_root(rank(), size(), "scatter", root);
  if (rank() == root) {
    check_same_type(in, out, "scatter");
    DTW_CHECK_EQ(in.count, size() * out.count, "rank " << rank() << ": reference scatter: input size");
    check_device_memory(in.data, in.bytes(), "reference scatter");
  }
  check_device_memory(out.data, out.bytes(), "reference scatter");
  verify_collective({"scatter", out.count, out.type, -1, root});
  quiesce("reference scatter");
  DTW_NCCL_CHECK(ncclGroupStart());
  if (out.count > 0) {
    if (rank() == root)
      for (int r = 0; r < size(); ++r)
        DTW_NCCL_CHECK(ncclSend(at(in.data, r * out.count, in.type), n(out.count), nccl_type(in.type), r,
                                comm_, ctx_->stream));
    DTW_NCCL_CHECK(ncclRecv(out.data, n(out.count), nccl_type(out.type), root, comm_, ctx_->stream));
  }
  run_collective("reference scatter", ncclGroupEnd());
}

}  // namespace dtw::nccl
