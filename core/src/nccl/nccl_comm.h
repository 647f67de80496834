#pragma once
// The nccl backend's Comm: one rank per GPU, one stream per rank. Buffers are
// device (or managed) memory; point-to-point also takes host memory (below).
// Point-to-point calls are queued and launched
// together, inside one ncclGroupStart/End, when the rank next waits: so an
// isend and an irecv to the same peer (or a sendrecv) progress together, as
// NCCL requires. Every wait polls instead of blocking, so a peer that never
// comes ends in TimeoutError and another rank's failure in AbortedError.
//
// NCCL has no tags and no message sizes: messages between two ranks match in
// the order they were posted, and a receive must have exactly the sender's
// count. Point-to-point on host memory (the runtime's own messages, and user
// code that keeps its data in std::vector, as chapter 00 does) is staged
// through a device buffer: two extra copies per message, so only device or
// managed memory moves at NCCL's own speed. split is ncclCommSplit.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "dtw/comm.h"

namespace dtw::nccl {

/// What all of one rank's communicators (the world and its splits) share.
struct RankContext {
  RankContext(int device, std::chrono::milliseconds timeout,
              std::shared_ptr<std::atomic<bool>> world_failed,
              std::shared_ptr<MemoryLedger> ledger);
  ~RankContext();
  RankContext(const RankContext&) = delete;
  RankContext& operator=(const RankContext&) = delete;
  int device;
  cudaStream_t stream = nullptr;
  std::chrono::milliseconds timeout;
  std::shared_ptr<std::atomic<bool>> world_failed;  // set once any rank failed
  int abandoned = 0;  // requests dropped while pending, outside error handling
  std::shared_ptr<MemoryLedger> ledger;  // the rank's memory ledger
  /// The rank's GPU and stream, counted in its ledger: every NcclComm's exec().
  Exec exec() const { return Exec::cuda(device, stream).with_ledger(ledger); }
};

struct NcclOp;

class NcclComm final : public Comm {
 public:
  /// Takes ownership of `comm` (possibly still initialising: non-blocking mode)
  /// and waits for it; `init_call` names the call that made it, for errors.
  NcclComm(std::shared_ptr<RankContext> ctx, ncclComm_t comm, int rank, std::vector<int> members,
           std::shared_ptr<Traffic> traffic, std::shared_ptr<Tracer> tracer,
           const char* init_call = "ncclCommInitRank");
  ~NcclComm() override;
  const char* backend() const override { return "nccl"; }

  /// Polls until NCCL finished the calls made so far (ncclInProgress gone).
  /// NCCL's rule for non-blocking communicators: once a call on one returned
  /// ncclInProgress (ncclGroupEnd, a collective, a split, the init), nothing
  /// but ncclCommGetAsyncError and ncclCommAbort may be called on it until
  /// that reports something else. Every NCCL call of this class comes after a
  /// settle (or, where a wait must not block, after seeing the state settled).
  void settle(const char* what);

  void reference_allreduce(Buffer data, ReduceOp op) override;
  void reference_broadcast(Buffer data, int root) override;
  void reference_reduce(Buffer data, ReduceOp op, int root) override;
  void reference_allgather(ConstBuffer in, Buffer out) override;
  void reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) override;
  void reference_alltoall(ConstBuffer in, Buffer out) override;
  void reference_gather(ConstBuffer in, Buffer out, int root) override;
  void reference_scatter(ConstBuffer in, Buffer out, int root) override;

  /// Drops a queued operation whose Request went away before it was launched.
  void withdraw(NcclOp* op) noexcept;

 protected:
  std::shared_ptr<detail::RequestState> start_send(ConstBuffer data, int peer, int tag,
                                                   const char* op_name) override;
  std::shared_ptr<detail::RequestState> start_recv(Buffer data, int peer, int tag,
                                                   const char* op_name) override;
  void do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) override;
  void complete(std::span<detail::RequestState* const> states, const char* op_name) override;
  std::size_t complete_any(std::span<detail::RequestState* const> states,
                           const char* op_name) override;
  bool poll(detail::RequestState* state, const char* op_name) override;
  std::unique_ptr<Comm> make_dup(std::uint64_t dup_id, bool channel) override;
  std::unique_ptr<Comm> make_subgroup(const std::vector<int>& group, int color,
                                      std::uint64_t split_id) override;
  void skip_subgroup(std::uint64_t split_id) override;
  void do_barrier() override;
  void do_copy_local(Buffer dst, ConstBuffer src) override;
  void do_divide_local(Buffer data, int divisor) override;
  void do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) override;

 private:
  std::shared_ptr<NcclOp> make_op(bool send, const void* data, std::int64_t count, DataType type,
                                  int peer, int tag);
  void check_device_memory(const void* p, std::int64_t bytes, const char* op_name) const;
  ncclComm_t split_nccl(int color, int key);  // ncclCommSplit, settled
  void flush();                   // launches every queued op in one group; needs a settled comm
  void launch_queued(const char* what);  // settle, then flush: may wait, bounded by the timeout
  void quiesce(const char* what);  // launch_queued, then settle: the next NCCL call is allowed
  void try_launch_queued(const char* what);  // flush only if settled now; never blocks
  bool in_progress();              // NCCL still works on the last call (ncclInProgress)
  void sync(const char* what);    // waits for the stream, abortably
  void fail_fast(const char* what);  // throws when NCCL reported an error or the world failed
  // Aborts the communicator at once (before the error is thrown), so NCCL's
  // kernels on the rank's stream end: unwinding then frees device memory
  // (cudaFree waits for the device) without waiting for a peer that is gone.
  void abort_now() noexcept;
  // Collective helpers (nccl_reference.cpp).
  void check_same_type(ConstBuffer in, Buffer out, const char* what) const;
  void run_collective(const char* what, ncclResult_t rc);  // check, settle, sync

  std::shared_ptr<RankContext> ctx_;
  ncclComm_t comm_;
  bool failed_ = false;
  void* barrier_word_ = nullptr;  // one device int the barrier allreduces
  // Two device bytes that stand in for empty messages (see flush): [0] is what
  // empty sends carry, [1] where empty receives land.
  void* empty_token_ = nullptr;
  // Where a non-blocking ncclCommSplit stores the new communicator, from NCCL's
  // own thread once the split completes: a member, not a local, so a split
  // abandoned by a timeout cannot write into a stack frame that is gone.
  ncclComm_t split_result_ = nullptr;
  std::vector<std::shared_ptr<NcclOp>> queued_;
  // Groups launched by flush, oldest first. Each gets an event on the stream
  // once NCCL has enqueued it (a non-blocking communicator may still be
  // connecting when ncclGroupEnd returns); the stream runs them in order, so a
  // group whose event completed is finished, and so is every group before it.
  struct Launched {
    std::vector<std::shared_ptr<NcclOp>> ops;
    cudaEvent_t done = nullptr;
  };
  std::deque<Launched> launched_;
  void retire(Launched& launched);  // hands staged data back, marks the ops done
  void advance(const char* what);   // retires finished groups; never blocks
};

/// ncclDataType_t of a dtw element type.
ncclDataType_t nccl_type(DataType type);
/// ncclRedOp_t of a dtw reduction (kAvg is ncclAvg).
ncclRedOp_t nccl_op(ReduceOp op);

/// One queued point-to-point operation.
struct NcclOp final : detail::RequestState {
  NcclComm* owner = nullptr;
  bool send = false;
  void* device = nullptr;          // what NCCL reads or writes
  void* host_copy_back = nullptr;  // staged receive: copy to this host memory when done
  bool staged = false;             // `device` was allocated here for host memory
  std::int64_t count = 0;
  DataType type = DataType::kByte;
  int nccl_peer = 0;
  bool done = false;
  void abandon() noexcept override {
    if (owner) owner->withdraw(this);
  }
};

}  // namespace dtw::nccl
