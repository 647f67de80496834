#include "threads/threads_comm.h"

#include <array>
#include <string_view>

#include "who.h"

namespace dtw::threads {

ThreadsComm::ThreadsComm(std::shared_ptr<World> world, int context, int rank,
                         std::vector<int> members, std::shared_ptr<Traffic> traffic,
                         std::shared_ptr<Tracer> tracer, Exec exec,
                         std::shared_ptr<DeviceRanks> devices)
    : Comm(rank, std::move(members), std::move(traffic), std::move(tracer), std::move(exec)),
      world_(std::move(world)),
      context_(context),
      devices_(std::move(devices)) {}

std::string ThreadsComm::who() const { return detail::who(rank(), world_rank()); }

std::shared_ptr<Op> ThreadsComm::make_op(int peer, int tag, const char* op_name) const {
  auto op = std::make_shared<Op>();
  op->owner = world_rank();
  op->peer_world = world_rank_of(peer);
  op->group_peer = peer;
  op->group_owner = rank();
  op->context = context_;
  op->msg_tag = tag;
  op->channel = is_collective_channel();
  op->call = op_name;
  op->world = world_;
  op->device = exec().device();
  op->stream = exec().stream();
  return op;
}

std::shared_ptr<detail::RequestState> ThreadsComm::start_send(ConstBuffer data, int peer, int tag,
                                                              const char* op_name) {
  auto op = make_op(peer, tag, op_name);
  op->send = true;
  op->src = data.data;
  op->count = data.count;
  op->type = data.type;
  // Device world: the receiver's copy waits for what this rank's stream holds now.
  if (devices_ && data.count > 0) op->ready = devices_->ready_marker(exec());
  world_->post(op);
  return op;
}

std::shared_ptr<detail::RequestState> ThreadsComm::start_recv(Buffer data, int peer, int tag,
                                                              const char* op_name) {
  auto op = make_op(peer, tag, op_name);
  op->dst = data.data;
  op->count = data.count;
  op->type = data.type;
  world_->post(op);
  return op;
}

// The receiver reads the sender's buffer directly and combines it into its own:
// one pass over memory, no scratch buffer.
void ThreadsComm::do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) {
  auto recv = make_op(src, tag, "recv_reduce");
  recv->dst = inout.data;
  recv->count = inout.count;
  recv->type = inout.type;
  recv->reduce = true;
  recv->reduce_op = op;
  world_->post(recv);
  const Request guard(recv);
  std::array<Op*, 1> ops{recv.get()};
  world_->complete(world_rank(), ops, "recv_reduce");
  recv->completed = true;
}

namespace {
std::vector<Op*> ops_of(std::span<detail::RequestState* const> states) {
  std::vector<Op*> ops;
  ops.reserve(states.size());
  for (detail::RequestState* s : states) ops.push_back(static_cast<Op*>(s));
  return ops;
}
}  // namespace

// Non-blocking, the same fused path: the reduction happens when the message is
// copied, by whichever thread copies it (see World::match).
std::shared_ptr<detail::RequestState> ThreadsComm::start_recv_reduce(Buffer inout, int src,
                                                                     ReduceOp op, int tag,
                                                                     const char* op_name) {
  auto recv = make_op(src, tag, op_name);
  recv->dst = inout.data;
  recv->count = inout.count;
  recv->type = inout.type;
  recv->reduce = true;
  recv->reduce_op = op;
  world_->post(recv);
  return recv;
}

void ThreadsComm::complete(std::span<detail::RequestState* const> states, const char* op_name) {
  world_->complete(world_rank(), ops_of(states), op_name);
}

std::size_t ThreadsComm::complete_any(std::span<detail::RequestState* const> states,
                                      const char* op_name) {
  return world_->complete(world_rank(), ops_of(states), op_name, /*any=*/true);
}

bool ThreadsComm::poll(detail::RequestState* state, const char* op_name) {
  // Only Comm::test polls on the caller's behalf; wait_some's sweep after a
  // completion is not a poll the timeout should count.
  const bool polling = std::string_view(op_name) == "test";
  return world_->test(world_rank(), *static_cast<Op*>(state), op_name, polling);
}

// Every rank numbers its dups alike, so the world hands all of them the same
// context without a message; the collective channel has a key of its own.
std::unique_ptr<Comm> ThreadsComm::make_dup(std::uint64_t dup_id, bool channel) {
  // The collective channel, made lazily at a rank's first collective, does
  // not check: whether a rank got past the start of a collective would then
  // depend on how fast another rank failed (bad-input tests, where one rank's
  // arguments are wrong, would reach the step's code on some runs and not on
  // others). Its first message checks anyway. dup() itself is a call of the
  // caller's, and fails at once while the launch aborts.
  if (!channel) world_->check_alive(world_rank());
  constexpr int kDupColor = -2, kChannelColor = -3;
  const int context = world_->subgroup_context(context_, dup_id, channel ? kChannelColor : kDupColor);
  return std::make_unique<ThreadsComm>(world_, context, rank(), members(), traffic_ptr(),
                                       tracer_ptr(), exec(), devices_);
}

std::unique_ptr<Comm> ThreadsComm::make_subgroup(const std::vector<int>& group, int color,
                                                 std::uint64_t split_id) {
  std::vector<int> members;
  int my_rank = -1;
  for (std::size_t i = 0; i < group.size(); ++i) {
    members.push_back(world_rank_of(group[i]));
    if (group[i] == rank()) my_rank = static_cast<int>(i);
  }
  const int context = world_->subgroup_context(context_, split_id, color);
  return std::make_unique<ThreadsComm>(world_, context, my_rank, std::move(members),
                                       traffic_ptr(), tracer_ptr(), exec(), devices_);
}

// Device worlds run the local steps on the rank's stream (device_ranks.h);
// host worlds keep Comm's memmove and host kernels.
void ThreadsComm::do_copy_local(Buffer dst, ConstBuffer src) {
  if (devices_) devices_->copy_local(exec(), who(), dst, src);
  else Comm::do_copy_local(dst, src);
}

void ThreadsComm::do_divide_local(Buffer data, int divisor) {
  if (devices_) devices_->divide_local(exec(), who(), data, divisor);
  else Comm::do_divide_local(data, divisor);
}

void ThreadsComm::do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op) {
  if (devices_) devices_->reduce_local(exec(), who(), inout, in, op);
  else Comm::do_reduce_local(inout, in, op);
}

}  // namespace dtw::threads
