#pragma once
// The threads backend's Comm: ranks are threads of one process sharing a World.
#include <memory>

#include "dtw/comm.h"
#include "threads/device_ranks.h"
#include "threads/threads_world.h"

namespace dtw::threads {

// With `devices` (LaunchOptions::device "cuda"), exec() is the rank's GPU and
// stream, and messages, local steps and the reference collectives' data go
// through the device (device_ranks.h); without, everything is as on the host.
class ThreadsComm final : public Comm {
 public:
  ThreadsComm(std::shared_ptr<World> world, int context, int rank, std::vector<int> members,
              std::shared_ptr<Traffic> traffic, std::shared_ptr<Tracer> tracer, Exec exec,
              std::shared_ptr<DeviceRanks> devices = nullptr);
  const char* backend() const override { return "threads"; }

  // Device buffers are staged through host memory, and the plain fixed-order
  // algorithms run there (threads_reference.cpp); on the host, Comm's own.
  void reference_allreduce(Buffer data, ReduceOp op) override;
  void reference_broadcast(Buffer data, int root) override;
  void reference_reduce(Buffer data, ReduceOp op, int root) override;
  void reference_allgather(ConstBuffer in, Buffer out) override;
  void reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) override;
  void reference_alltoall(ConstBuffer in, Buffer out) override;
  void reference_gather(ConstBuffer in, Buffer out, int root) override;
  void reference_scatter(ConstBuffer in, Buffer out, int root) override;

 protected:
  std::shared_ptr<detail::RequestState> start_send(ConstBuffer data, int peer, int tag,
                                                   const char* op_name) override;
  std::shared_ptr<detail::RequestState> start_recv(Buffer data, int peer, int tag,
                                                   const char* op_name) override;
  void do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) override;
  std::shared_ptr<detail::RequestState> start_recv_reduce(Buffer inout, int src, ReduceOp op,
                                                          int tag, const char* op_name) override;
  void complete(std::span<detail::RequestState* const> states, const char* op_name) override;
  std::size_t complete_any(std::span<detail::RequestState* const> states,
                           const char* op_name) override;
  bool poll(detail::RequestState* state, const char* op_name) override;
  std::unique_ptr<Comm> make_dup(std::uint64_t dup_id, bool channel) override;
  std::unique_ptr<Comm> make_subgroup(const std::vector<int>& group, int color,
                                      std::uint64_t split_id) override;
  void do_copy_local(Buffer dst, ConstBuffer src) override;
  void do_divide_local(Buffer data, int divisor) override;
  void do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) override;

 private:
  std::shared_ptr<Op> make_op(int peer, int tag, const char* op_name) const;
  std::string who() const;

  std::shared_ptr<World> world_;
  int context_;
  std::shared_ptr<DeviceRanks> devices_;  // null on the host
};

}  // namespace dtw::threads
