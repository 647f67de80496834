// The nccl backend's point-to-point, barrier, split and recv_reduce.
#include "nccl/nccl_comm.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>

#include "dtw/cuda_check.h"
#include "dtw/kernels/cuda_reduce.h"

namespace dtw::nccl {

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kByte: break;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kSum: break;
  }
  return ncclSum;
}

namespace {
// Arrays and staged messages are stream-ordered allocations (cudaMallocAsync)
// from the device's default memory pool. Unlike cudaMalloc memory, pool memory
// is reachable from another GPU only once the pool grants that GPU access:
// peer access (cudaDeviceEnablePeerAccess, which NCCL turns on) does not cover
// pools. NCCL between the GPUs of one process reads and writes the peer's
// buffers directly, so without this the first two-GPU run would end in an
// illegal address. tests/gpu/nccl_protocol_test.cpp checks that the access is
// asked for (no GPU needed); nccl_world_test.cpp that it holds and that pool
// memory moves between GPUs (two GPUs or more).
void share_pool_with_peers(int device) {
  int devices = 0;
  DTW_CUDA_CHECK(cudaGetDeviceCount(&devices));
  cudaMemPool_t pool = nullptr;
  DTW_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  for (int peer = 0; peer < devices; ++peer) {
    if (peer == device) continue;
    int can = 0;  // can `peer` reach memory of `device`?
    DTW_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, peer, device));
    if (!can) continue;  // NCCL then copies through host memory, never touching the pool
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    DTW_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
  }
}
}  // namespace

RankContext::RankContext(int dev, std::chrono::milliseconds t,
                         std::shared_ptr<std::atomic<bool>> failed,
                         std::shared_ptr<MemoryLedger> rank_ledger)
    : device(dev), timeout(t), world_failed(std::move(failed)), ledger(std::move(rank_ledger)) {
  // Every CUDA call of this rank runs on its thread, which this makes the
  // device's: the runtime's current device is per thread.
  DTW_CUDA_CHECK(cudaSetDevice(device));
  DTW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  share_pool_with_peers(device);
}

RankContext::~RankContext() {
  if (stream) cudaStreamDestroy(stream);
}

NcclComm::NcclComm(std::shared_ptr<RankContext> ctx, ncclComm_t comm, int rank,
                   std::vector<int> members, std::shared_ptr<Traffic> traffic,
                   std::shared_ptr<Tracer> tracer, const char* init_call)
    : Comm(rank, std::move(members), std::move(traffic), std::move(tracer), ctx->exec()),
      ctx_(std::move(ctx)),
      comm_(comm) {
  try {
    settle(init_call);
    DTW_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int)));
    // Defined contents, so the barrier's allreduce never reads uninitialised memory.
    DTW_CUDA_CHECK(cudaMemset(barrier_word_, 0, sizeof(int)));
  } catch (...) {
    if (comm_) ncclCommAbort(comm_);  // the destructor does not run for a failed constructor
    if (barrier_word_) cudaFree(barrier_word_);
    throw;
  }
}

namespace {
// Polls a non-blocking communicator until NCCL is done with its last call, at
// most until `deadline`; false when it is still busy or reports an error.
bool settled_by(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) noexcept {
  ncclResult_t state = ncclInProgress;
  while (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  return state == ncclSuccess;
}
}  // namespace

NcclComm::~NcclComm() {
  for (auto& op : queued_) op->owner = nullptr;
  for (auto& launched : launched_) {
    for (auto& op : launched.ops) op->owner = nullptr;
    if (launched.done) cudaEventDestroy(launched.done);
  }
  if (comm_) {
    const auto deadline = std::chrono::steady_clock::now() + ctx_->timeout;
    // A failed world (or an exception unwinding through this rank) may have
    // operations a peer will never match: abort instead of waiting for them.
    // Finalize is an NCCL call like any other: only on a settled communicator.
    if (failed_ || ctx_->world_failed->load() || std::uncaught_exceptions() > 0 ||
        !settled_by(comm_, deadline)) {
      ncclCommAbort(comm_);
    } else {
      // Finalize flushes what is still queued inside NCCL; bounded like every wait.
      ncclCommFinalize(comm_);
      if (settled_by(comm_, deadline)) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  // Device memory last: cudaFree waits for the whole device, so freeing while a
  // kernel of a communicator not yet aborted waits for a peer would hang.
  if (barrier_word_) cudaFree(barrier_word_);
  if (empty_token_) cudaFree(empty_token_);
}

void NcclComm::abort_now() noexcept {
  failed_ = true;
  if (!comm_) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclComm::fail_fast(const char* what) {
  DTW_CHECK(comm_ != nullptr, AbortedError,
            "rank " << rank() << ": " << what << ": this communicator was aborted after an earlier failure");
  ncclResult_t state = ncclSuccess;
  DTW_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  if (state != ncclSuccess && state != ncclInProgress) {
    const std::string detail = ncclGetLastError(comm_);
    abort_now();
    DTW_CHECK(false, NcclError, "rank " << rank() << ": " << what << ": " << ncclGetErrorString(state)
                                        << " (" << detail << ")");
  }
  if (ctx_->world_failed->load()) {
    abort_now();
    DTW_CHECK(false, AbortedError, "rank " << rank() << ": " << what << " cancelled: another rank failed");
  }
}

// Non-blocking communicators return ncclInProgress while NCCL still works in
// the background (connecting to a peer, for instance); poll it, abortably.
void NcclComm::settle(const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + ctx_->timeout;
  for (;;) {
    fail_fast(what);  // also refuses a communicator aborted earlier
    if (!in_progress()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      abort_now();
      DTW_CHECK(false, TimeoutError, "rank " << rank() << ": " << what << " still in progress after "
                                             << ctx_->timeout.count() << " ms");
    }
    std::this_thread::yield();
  }
  fail_fast(what);
}

void NcclComm::sync(const char* what) {
  settle(what);
  const auto deadline = std::chrono::steady_clock::now() + ctx_->timeout;
  for (;;) {
    const cudaError_t rc = cudaStreamQuery(ctx_->stream);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) {
      abort_now();
      DTW_CUDA_CHECK(rc);
    }
    fail_fast(what);
    if (std::chrono::steady_clock::now() > deadline) {
      abort_now();
      DTW_CHECK(false, TimeoutError,
                "rank " << rank() << ": " << what << " waited more than " << ctx_->timeout.count()
                        << " ms: a peer never posted the matching call (NCCL matches messages in "
                           "posting order and needs equal counts on both sides)");
    }
    std::this_thread::yield();
  }
}

namespace {
// True for device and managed memory, which NCCL reads and writes directly;
// false for host memory, pageable or pinned.
bool on_device(const void* p) {
  cudaPointerAttributes attr{};
  const cudaError_t rc = cudaPointerGetAttributes(&attr, p);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear the error so the next CUDA call does not report it
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}
}  // namespace

void NcclComm::check_device_memory(const void* p, std::int64_t bytes, const char* op_name) const {
  if (bytes == 0) return;
  DTW_CHECK_ARG(on_device(p), "rank " << rank() << ": " << op_name
                                      << ": the nccl backend runs this on the GPU, but " << p
                                      << " is host memory (allocate with cudaMalloc/cudaMallocManaged)");
}

std::shared_ptr<NcclOp> NcclComm::make_op(bool send, const void* data, std::int64_t count,
                                          DataType type, int peer, int tag) {
  auto op = std::make_shared<NcclOp>();
  op->owner = this;
  op->send = send;
  op->count = count;
  op->type = type;
  op->nccl_peer = peer;
  const std::int64_t bytes = count * static_cast<std::int64_t>(size_of(type));
  if (bytes > 0 && (tag < 0 || !on_device(data))) {
    // Host memory (always for the runtime's own messages, negative tags): NCCL
    // only moves device memory, so the message goes through a device buffer,
    // copied in here for a send and back to the host when a receive completes.
    op->staged = true;
    DTW_CUDA_CHECK(cudaMallocAsync(&op->device, static_cast<std::size_t>(bytes), ctx_->stream));
    if (send)
      DTW_CUDA_CHECK(cudaMemcpyAsync(op->device, data, static_cast<std::size_t>(bytes),
                                     cudaMemcpyHostToDevice, ctx_->stream));
    else
      op->host_copy_back = const_cast<void*>(data);
  } else {
    op->device = const_cast<void*>(data);
  }
  queued_.push_back(op);
  return op;
}

std::shared_ptr<detail::RequestState> NcclComm::start_send(ConstBuffer data, int peer, int tag,
                                                           const char* /*op_name*/) {
  return make_op(true, data.data, data.count, data.type, peer, tag);
}

std::shared_ptr<detail::RequestState> NcclComm::start_recv(Buffer data, int peer, int tag,
                                                           const char* /*op_name*/) {
  return make_op(false, data.data, data.count, data.type, peer, tag);
}

void NcclComm::withdraw(NcclOp* op) noexcept {
  if (std::uncaught_exceptions() == 0 && !ctx_->world_failed->load()) ++ctx_->abandoned;
  auto it = std::find_if(queued_.begin(), queued_.end(), [&](const auto& q) { return q.get() == op; });
  if (it == queued_.end()) {
    // Already launched (a barrier or collective flushed it): NCCL cannot take
    // it back, but a staged receive must not copy into host memory the caller
    // may free now. The next wait completes it into its device buffer only.
    op->host_copy_back = nullptr;
    return;
  }
  if (op->staged) cudaFreeAsync(op->device, ctx_->stream);
  queued_.erase(it);
}

void NcclComm::do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) {
  // Host memory: Comm's default receives into host scratch (staged through the
  // device like every host message) and reduces on the CPU.
  if (inout.count > 0 && !on_device(inout.data)) return Comm::do_recv_reduce(inout, src, op, tag);
  // Receive into device scratch, then reduce on this rank's stream: two passes
  // over memory, as NCCL gives no access to the sender's buffer.
  struct Scratch {
    void* p = nullptr;
    cudaStream_t s;
    ~Scratch() {
      if (p) cudaFreeAsync(p, s);
    }
  } scratch{nullptr, ctx_->stream};
  check_device_memory(inout.data, inout.bytes(), "recv_reduce");
  if (inout.count > 0)
    DTW_CUDA_CHECK(cudaMallocAsync(&scratch.p, static_cast<std::size_t>(inout.bytes()), ctx_->stream));
  auto state = start_recv(Buffer{scratch.p, inout.count, inout.type}, src, tag, "recv_reduce");
  const Request guard(state);
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), "recv_reduce");
  state->completed = true;
  kernels::device_reduce_into(inout, ConstBuffer{scratch.p, inout.count, inout.type}, op, ctx_->stream);
  sync("recv_reduce");
}

void NcclComm::do_barrier() {
  quiesce("barrier");
  DTW_NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, ctx_->stream));
  sync("barrier");
}

// Local steps run on the rank's stream and are waited for, so the caller may
// read the result (or free the source) once the call returns, as on the host
// backends. Queued point-to-point stays queued: launching it here would wait
// for peers whose matching calls this rank may not have reached yet.
void NcclComm::do_copy_local(Buffer dst, ConstBuffer src) {
  check_device_memory(dst.data, dst.bytes(), "copy_local");
  check_device_memory(src.data, src.bytes(), "copy_local");
  DTW_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(src.bytes()),
                                 cudaMemcpyDeviceToDevice, ctx_->stream));
  sync("copy_local");
}

void NcclComm::do_divide_local(Buffer data, int divisor) {
  check_device_memory(data.data, data.bytes(), "divide_local");
  kernels::device_divide(data, divisor, ctx_->stream);
  sync("divide_local");
}

// On the rank's stream when both are device memory. irecv_reduce into host
// memory receives into device scratch (where NCCL can write), so that case
// brings the scratch to the host first.
void NcclComm::do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) {
  const bool out_on_device = on_device(inout.data), in_on_device = on_device(in.data);
  if (!out_on_device && !in_on_device) return Comm::do_reduce_local(inout, in, op);
  if (!out_on_device) {
    std::vector<std::byte> host(static_cast<std::size_t>(in.bytes()));
    DTW_CUDA_CHECK(cudaMemcpy(host.data(), in.data, host.size(), cudaMemcpyDeviceToHost));
    return Comm::do_reduce_local(inout, ConstBuffer{host.data(), in.count, in.type}, op);
  }
  check_device_memory(in.data, in.bytes(), "reduce_local");
  kernels::device_reduce_into(inout, in, op, ctx_->stream);
  sync("reduce_local");
}

// ncclCommSplit is collective over the whole parent: members of a group call
// it here with their color, ranks that passed kNoColor from skip_subgroup with
// NCCL_SPLIT_NOCOLOR. Each member's key is the rank Comm::split gave it, so
// NCCL's order (by key, ties by parent rank: the same rule) cannot differ; the
// check holds NCCL to it, as a wrong order would mix up every later message.
ncclComm_t NcclComm::split_nccl(int color, int key) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // like the world: every wait polls, abortably
  split_result_ = nullptr;
  settle("ncclCommSplit");  // the parent may still be busy with a group launched earlier
  DTW_NCCL_CHECK(ncclCommSplit(comm_, color, key, &split_result_, &config));
  // Non-blocking, the split runs on NCCL's thread and reports on the parent;
  // it writes the new communicator into split_result_ before it finishes.
  settle("ncclCommSplit");
  const ncclComm_t sub = split_result_;
  split_result_ = nullptr;
  return sub;
}

std::unique_ptr<Comm> NcclComm::make_subgroup(const std::vector<int>& group, int color,
                                              std::uint64_t /*split_id*/) {
  const int me = static_cast<int>(std::find(group.begin(), group.end(), rank()) - group.begin());
  const ncclComm_t sub = split_nccl(color, me);
  DTW_CHECK(sub != nullptr, NcclError,
            "rank " << rank() << ": split with color " << color << ": ncclCommSplit made no communicator");
  std::vector<int> world;
  for (int r : group) world.push_back(world_rank_of(r));
  // The constructor waits for the new communicator; if the check below throws,
  // its destructor aborts it (an exception is unwinding).
  auto made = std::make_unique<NcclComm>(ctx_, sub, me, std::move(world), traffic_ptr(), tracer_ptr(),
                                         "ncclCommSplit");
  int nccl_rank = -1, nccl_size = -1;
  DTW_NCCL_CHECK(ncclCommUserRank(sub, &nccl_rank));
  DTW_NCCL_CHECK(ncclCommCount(sub, &nccl_size));
  DTW_CHECK(nccl_rank == me && nccl_size == static_cast<int>(group.size()), NcclError,
            "rank " << rank() << ": split with color " << color << ": NCCL made this rank " << nccl_rank
                    << " of " << nccl_size << ", but dtw ordered it rank " << me << " of " << group.size()
                    << " (by key, ties by parent rank)");
  return made;
}

void NcclComm::skip_subgroup(std::uint64_t /*split_id*/) {
  const ncclComm_t none = split_nccl(NCCL_SPLIT_NOCOLOR, 0);
  if (none) ncclCommAbort(none);  // NCCL promises none; never leak one
}

}  // namespace dtw::nccl
