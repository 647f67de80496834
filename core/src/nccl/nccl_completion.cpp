// The nccl backend's launching and completion of point-to-point: queued
// operations go to NCCL in one group at the next wait (or test), and
// completion is read from the stream, either by waiting for all of it
// (complete) or, without blocking, from one event per launched group
// (complete_any, poll). Progress itself happens on the GPU.
#include <algorithm>
#include <thread>

#include "dtw/cuda_check.h"
#include "nccl/nccl_comm.h"

namespace dtw::nccl {

bool NcclComm::in_progress() {
  ncclResult_t state = ncclSuccess;
  DTW_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  return state == ncclInProgress;
}

// ncclGroupEnd on a non-blocking communicator may return ncclInProgress (NCCL
// still connecting to a peer, say); the group is launched, but until NCCL has
// settled nothing else may be called on the communicator -- not even the next
// group's ncclSend. So every launch settles first.
void NcclComm::launch_queued(const char* what) {
  settle(what);
  flush();
}

// For a call of NCCL's own right after (a collective, the barrier's allreduce).
void NcclComm::quiesce(const char* what) {
  launch_queued(what);
  settle(what);
}

// poll and wait_any must not block on a peer: while NCCL is still busy with the
// last group, new operations stay queued (in posting order) for the next try.
void NcclComm::try_launch_queued(const char* what) {
  fail_fast(what);
  if (queued_.empty() || in_progress()) return;
  flush();
}

void NcclComm::flush() {
  if (queued_.empty()) return;
  std::vector<std::shared_ptr<NcclOp>> ops;
  ops.swap(queued_);
  // An empty message must still be a message: its arrival is the signal (a
  // barrier sends nothing else). NCCL would skip zero elements on both sides,
  // so both sides move one token byte instead; the pairing is unchanged,
  // since every empty send meets an empty receive in posting order.
  const bool any_empty =
      std::any_of(ops.begin(), ops.end(), [](const auto& op) { return op->count == 0; });
  if (any_empty && !empty_token_)
    DTW_CUDA_CHECK(cudaMalloc(&empty_token_, 2));
  DTW_NCCL_CHECK(ncclGroupStart());
  for (const auto& op : ops) {
    const bool empty = op->count == 0;
    const auto n = empty ? std::size_t{1} : static_cast<std::size_t>(op->count);
    const ncclDataType_t type = empty ? ncclUint8 : nccl_type(op->type);
    auto* token = static_cast<unsigned char*>(empty_token_);
    if (op->send)
      DTW_NCCL_CHECK(ncclSend(empty ? token : op->device, n, type, op->nccl_peer, comm_, ctx_->stream));
    else
      DTW_NCCL_CHECK(ncclRecv(empty ? token + 1 : op->device, n, type, op->nccl_peer, comm_, ctx_->stream));
  }
  const ncclResult_t rc = ncclGroupEnd();
  launched_.push_back({std::move(ops), nullptr});
  DTW_NCCL_CHECK(rc);
}

void NcclComm::retire(Launched& launched) {
  for (const auto& op : launched.ops) {
    if (op->staged) {
      // A synchronous copy on the legacy stream, on purpose: the group has
      // finished (its event completed, or the stream was synced), and a copy
      // on the rank's stream would wait behind later groups, which may be
      // waiting for a peer.
      if (op->host_copy_back)
        DTW_CUDA_CHECK(cudaMemcpy(op->host_copy_back, op->device,
                                  static_cast<std::size_t>(op->count) * size_of(op->type),
                                  cudaMemcpyDeviceToHost));
      // The group has finished on the stream, so the pool may reuse the buffer
      // at once; cudaFree would wait for the whole device instead.
      DTW_CUDA_CHECK(cudaFreeAsync(op->device, ctx_->stream));
    }
    op->received_count = op->send ? 0 : op->count;
    op->done = true;
    op->owner = nullptr;
  }
  if (launched.done) cudaEventDestroy(launched.done);
  launched.done = nullptr;
}

void NcclComm::advance(const char* what) {
  fail_fast(what);
  ncclResult_t state = ncclSuccess;
  DTW_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  if (state == ncclInProgress) return;  // NCCL is still enqueuing: nothing to mark yet
  for (Launched& launched : launched_) {
    if (launched.done) continue;
    DTW_CUDA_CHECK(cudaEventCreateWithFlags(&launched.done, cudaEventDisableTiming));
    DTW_CUDA_CHECK(cudaEventRecord(launched.done, ctx_->stream));
  }
  while (!launched_.empty()) {
    const cudaError_t rc = cudaEventQuery(launched_.front().done);
    if (rc == cudaErrorNotReady) return;
    if (rc != cudaSuccess) {
      abort_now();
      DTW_CUDA_CHECK(rc);
    }
    retire(launched_.front());
    launched_.pop_front();
  }
}

void NcclComm::complete(std::span<detail::RequestState* const> states, const char* op_name) {
  launch_queued(op_name);
  sync(op_name);
  // Everything launched so far has finished: hand staged data back to the host.
  for (Launched& launched : launched_) retire(launched);
  launched_.clear();
  (void)states;  // every queued op completed, these among them
}

// Progress is on the GPU: the stream runs what flush launched; these calls only
// launch what is queued and look at the groups' events.
std::size_t NcclComm::complete_any(std::span<detail::RequestState* const> states,
                                   const char* op_name) {
  const auto deadline = std::chrono::steady_clock::now() + ctx_->timeout;
  for (;;) {
    try_launch_queued(op_name);
    advance(op_name);
    for (std::size_t i = 0; i < states.size(); ++i)
      if (static_cast<NcclOp*>(states[i])->done) return i;
    if (std::chrono::steady_clock::now() > deadline) {
      abort_now();
      DTW_CHECK(false, TimeoutError,
                "rank " << rank() << ": " << op_name << " waited more than " << ctx_->timeout.count()
                        << " ms for any of " << states.size()
                        << " requests: a peer never posted the matching call");
    }
    std::this_thread::yield();
  }
}

bool NcclComm::poll(detail::RequestState* state, const char* op_name) {
  try_launch_queued(op_name);
  advance(op_name);
  return static_cast<NcclOp*>(state)->done;
}

// A dup (or the collective channel) is ncclCommSplit with one color: the same
// ranks in the same order, a communicator of NCCL's own, so its messages never
// pair with this one's.
std::unique_ptr<Comm> NcclComm::make_dup(std::uint64_t /*dup_id*/, bool channel) {
  fail_fast(channel ? "collective channel" : "dup");
  const ncclComm_t made = split_nccl(0, rank());
  DTW_CHECK(made != nullptr, NcclError, "rank " << rank() << ": dup: ncclCommSplit made no communicator");
  return std::make_unique<NcclComm>(ctx_, made, rank(), members(), traffic_ptr(), tracer_ptr(),
                                    "ncclCommSplit");
}

}  // namespace dtw::nccl
