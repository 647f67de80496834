#pragma once
// The threads backend's Comm: ranks are threads of one process sharing a World.
#include <memory>

#include "dtw/comm.h"
#include "threads/threads_world.h"

namespace dtw::threads {

class ThreadsComm final : public Comm {
 public:
  ThreadsComm(std::shared_ptr<World> world, int context, int rank, std::vector<int> members,
              std::shared_ptr<Traffic> traffic, std::shared_ptr<Tracer> tracer, Exec exec);
  const char* backend() const override { return "threads"; }

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

 private:
  std::shared_ptr<Op> make_op(int peer, int tag, const char* op_name) const;

  std::shared_ptr<World> world_;
  int context_;
};

}  // namespace dtw::threads
