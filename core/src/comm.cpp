// The backend-independent half of Comm: argument checks, traffic counters and
// trace events, and the operations built from point-to-point (barrier, split,
// the fallback recv_reduce). Backends only move bytes.
#include "dtw/comm.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "dtw/array.h"
#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "who.h"

namespace dtw {
namespace {
// The fingerprint check is on in debug builds, and anywhere when the
// environment says DTW_CHECK_COLLECTIVES=1 (or off with =0).
bool collective_check_default() {
  if (const char* env = std::getenv("DTW_CHECK_COLLECTIVES")) return std::string(env) != "0";
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

// The blocking recv_reduce's scratch, kept between calls. A fresh buffer per
// call is, above 32 MiB, a new mapping that malloc returns to the system on
// free, faulted in page by page on every receive (8192 faults, each zeroing
// a page, for 32 MiB): over MPI that took more time than the ring's copies
// (64 MiB ring allreduce on 2 processes, a median of 1.20x MPI_Allreduce's
// time; with the scratch kept, 0.60x; docs/results/collectives_mpi.md). Every call takes
// a block of its own, so concurrent and nested receives never share one; the
// pool keeps a few blocks, the largest it has seen.
class ScratchPool {
 public:
  struct Block {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
  };
  Block take(std::size_t n) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        Block b = std::move(free_.back());
        free_.pop_back();
        if (b.size >= n) return b;
      }
    }
    return {std::unique_ptr<std::byte[]>(new std::byte[n]), n};  // uninitialised: the receive fills it
  }
  void give(Block b) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kKept) free_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kKept = 4;
  std::mutex mutex_;
  std::vector<Block> free_;
};

ScratchPool& scratch_pool() {
  static ScratchPool pool;
  return pool;
}
}  // namespace

using detail::who;

Comm::Comm(int rank, std::vector<int> members, std::shared_ptr<Traffic> traffic,
           std::shared_ptr<Tracer> tracer, Exec exec)
    : rank_(rank),
      size_(static_cast<int>(members.size())),
      members_(std::move(members)),
      traffic_(std::move(traffic)),
      tracer_(std::move(tracer)),
      exec_(std::move(exec)),
      verify_collectives_(collective_check_default()) {}


void Comm::check_peer(int peer, const char* op) const {
  DTW_CHECK_ARG(peer >= 0 && peer < size_, who(rank_, world_rank()) << ": " << op << " with peer " << peer
                                                   << ": peer out of range [0, " << size_ << ")");
}

void Comm::check_tag(int tag, const char* op) const {
  DTW_CHECK_ARG(tag >= 0 && tag <= kMaxTag, who(rank_, world_rank()) << ": " << op << " with tag " << tag
                                                    << ": tag out of range [0, " << kMaxTag << "]");
}

void Comm::check_exec(const Exec& where, const char* call) const {
  DTW_CHECK_ARG(where.is_host() || same_place(where, exec_),
                who(rank_, world_rank()) << ": " << call << ": the buffer is on " << where.describe()
                                         << " but this communicator runs on " << exec_.describe()
                                         << " (make a rank's Arrays on comm.exec())");
}

void Comm::check_count(std::int64_t count, const char* op) const {
  DTW_CHECK_ARG(count >= 0, who(rank_, world_rank()) << ": " << op << " with count " << count
                                    << ": count is negative");
}

void Comm::check_op(ReduceOp op, const char* call) const {
  DTW_CHECK_ARG(is_valid(op), who(rank_, world_rank())
                                  << ": " << call << " with op " << static_cast<int>(op)
                                  << ": not a ReduceOp (sum, prod, min, max, avg = 0..4)");
}

void Comm::check_type(DataType type, const char* call) const {
  DTW_CHECK_ARG(is_valid(type),
                who(rank_, world_rank())
                    << ": " << call << " with element type " << static_cast<int>(type)
                    << ": not a DataType (byte, int32, int64, float32, float64 = 0..4)");
}

Request Comm::post_send(ConstBuffer data, int peer, int tag, const char* call) {
  check_peer(peer, call);
  check_tag(tag, call);
  check_count(data.count, call);
  check_type(data.type, call);
  auto state = start_send(data, peer, tag, call);
  state->comm = this;
  state->op = call;
  state->is_send = true;
  state->peer = peer;
  state->tag = tag;
  state->bytes = data.bytes();
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  state->start_work = tracer_->enabled() ? tracer_->work() : -1;
  return Request(std::move(state));
}

Request Comm::post_recv(Buffer data, int peer, int tag, const char* call) {
  check_peer(peer, call);
  check_tag(tag, call);
  check_count(data.count, call);
  check_type(data.type, call);
  auto state = start_recv(data, peer, tag, call);
  state->comm = this;
  state->op = call;
  state->elem_bytes = static_cast<std::int64_t>(size_of(data.type));
  state->peer = peer;
  state->tag = tag;
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  state->start_work = tracer_->enabled() ? tracer_->work() : -1;
  return Request(std::move(state));
}

Request Comm::isend_buffer(ConstBuffer data, int peer, int tag) {
  return post_send(data, peer, tag, "isend");
}

Request Comm::irecv_buffer(Buffer data, int peer, int tag) {
  return post_recv(data, peer, tag, "irecv");
}

// Counts the message and records the trace event once a request completed.
void Comm::finish(detail::RequestState& state) {
  const int peer = world_rank_of(state.peer);
  if (!state.is_send) state.bytes = state.received_count * state.elem_bytes;
  if (state.is_send) {
    traffic_->count_sent(peer, state.bytes);
  } else {
    traffic_->count_received(peer, state.bytes);
  }
  if (tracer_->enabled())
    tracer_->comm_event(state.op, peer, state.bytes, state.tag, state.start_us, state.is_send,
                        trace_channel_, state.start_work);
}

// exception out of complete() withdraws it before the caller's buffer goes away.
void Comm::send_buffer(ConstBuffer data, int peer, int tag) {
  Request r = post_send(data, peer, tag, "send");
  complete_requests(std::span<Request>(&r, 1), "send");
}

std::int64_t Comm::recv_buffer(Buffer data, int peer, int tag) {
  Request r = post_recv(data, peer, tag, "recv");
  complete_requests(std::span<Request>(&r, 1), "recv");
  return r.received_count();
}

std::int64_t Comm::sendrecv_buffer(ConstBuffer out, int dst, Buffer in, int src, int tag) {
  // Post the receive first so that the peer's send can land at once.
  std::array<Request, 2> requests{post_recv(in, src, tag, "sendrecv"),
                                  post_send(out, dst, tag, "sendrecv")};
  complete_requests(requests, "sendrecv");
  return requests[0].received_count();
}

void Comm::recv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag) {
  check_peer(src, "recv_reduce");
  check_tag(tag, "recv_reduce");
  check_count(inout.count, "recv_reduce");
  check_type(inout.type, "recv_reduce");
  check_op(op, "recv_reduce");
  DTW_CHECK_ARG(inout.type != DataType::kByte,
                "rank " << rank_ << ": recv_reduce from rank " << src << ": cannot reduce raw bytes");
  const double start = tracer_->enabled() ? tracer_->now_us() : 0;
  const double start_work = tracer_->enabled() ? tracer_->work() : -1;
  do_recv_reduce(inout, src, op, tag);
  traffic_->count_received(world_rank_of(src), inout.bytes());
  if (tracer_->enabled())
    tracer_->comm_event("recv_reduce", world_rank_of(src), inout.bytes(), tag, start, false,
                        trace_channel_, start_work);
}

Request Comm::irecv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag) {
  check_peer(src, "irecv_reduce");
  check_tag(tag, "irecv_reduce");
  check_count(inout.count, "irecv_reduce");
  DTW_CHECK_ARG(inout.type != DataType::kByte, who(rank_, world_rank())
                                                   << ": irecv_reduce from rank " << src
                                                   << ": cannot reduce raw bytes");
  auto state = start_recv_reduce(inout, src, op, tag, "irecv_reduce");
  state->comm = this;
  state->op = "irecv_reduce";
  state->elem_bytes = static_cast<std::int64_t>(size_of(inout.type));
  state->peer = src;
  state->tag = tag;
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  state->start_work = tracer_->enabled() ? tracer_->work() : -1;
  return Request(std::move(state));
}

std::shared_ptr<detail::RequestState> Comm::start_recv_reduce(Buffer inout, int src, ReduceOp op,
                                                              int tag, const char* op_name) {
  // Scratch where the rank's memory is (device memory on nccl), counted as a
  // communication buffer while the receive is in flight.
  auto scratch = std::make_shared<Array<std::byte>>(exec(), inout.bytes(), MemoryCategory::kCommBuffers);
  auto state = start_recv(Buffer{scratch->data(), inout.count, inout.type}, src, tag, op_name);
  state->on_complete = [this, inout, op, src, tag, scratch](detail::RequestState& s) {
    DTW_CHECK_ARG(s.received_count == inout.count,
                  who(rank_, world_rank()) << ": irecv_reduce from rank " << src << " tag " << tag
                                           << ": got " << s.received_count
                                           << " elements, expected exactly " << inout.count);
    if (inout.count > 0) do_reduce_local(inout, ConstBuffer{scratch->data(), inout.count, inout.type}, op);
  };
  return state;
}

void Comm::do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) {
  // Two passes over memory: receive into scratch, then combine. The block
  // goes back to the pool only when the receive completed: after an error the
  // backend may still hold it.
  ScratchPool::Block scratch = scratch_pool().take(static_cast<std::size_t>(inout.bytes()));
  Buffer tmp{scratch.data.get(), inout.count, inout.type};
  auto state = start_recv(tmp, src, tag, "recv_reduce");
  const Request guard(state);
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), "recv_reduce");
  state->completed = true;
  DTW_CHECK_ARG(state->received_count == inout.count,
                "rank " << rank_ << ": recv_reduce from rank " << src << " tag " << tag << ": got "
                        << state->received_count << " elements, expected " << inout.count);
  kernels::reduce_into(inout, tmp, op);
  scratch_pool().give(std::move(scratch));
}

// The runtime's own exchanges are named after what they serve, so a deadlock
// report says "split" or "collective fingerprint check", not a bare tag.
const char* Comm::internal_call_name(int tag) {
  switch (tag) {
    case kBarrierTag: return "barrier";
    case kSplitTag: return "split";
    case kReferenceTag: return "reference collective";
    case kFingerprintTag: return "collective fingerprint check";
    default: return "internal exchange";
  }
}

void Comm::internal_sendrecv(ConstBuffer out, int dst, Buffer in, int src, int tag) {
  const char* call = internal_call_name(tag);
  auto r = start_recv(in, src, tag, call);
  const Request recv_guard(r);
  auto s = start_send(out, dst, tag, call);
  const Request send_guard(s);
  std::array<detail::RequestState*, 2> both{r.get(), s.get()};
  complete(both, call);
  r->completed = s->completed = true;
}

void Comm::barrier() {
  const double start = tracer_->enabled() ? tracer_->now_us() : 0;
  do_barrier();
  if (tracer_->enabled()) tracer_->comm_event("barrier", -1, 0, 0, start);
}

// Dissemination barrier: in round k every rank signals rank+2^k and waits for
// rank-2^k. After ceil(lg p) rounds every rank has (transitively) heard from all.
void Comm::do_barrier() {
  std::byte token{}, got{};
  for (int dist = 1; dist < size_; dist *= 2) {
    internal_sendrecv({&token, 1, DataType::kByte}, (rank_ + dist) % size_,
                      {&got, 1, DataType::kByte}, (rank_ - dist + size_) % size_, kBarrierTag);
  }
}

std::unique_ptr<Comm> Comm::dup() {
  auto made = make_dup(dups_++, false);
  made->verify_collectives_ = verify_collectives_;
  return made;
}

Comm& Comm::collective_channel() {
  if (is_channel_) return *this;
  if (!channel_) {
    // Numbered apart from dup()'s, so making it never shifts what later dups get.
    channel_ = make_dup(0, true);
    channel_->is_channel_ = true;
    channel_->trace_channel_ = tracer_->new_channel();
    channel_->verify_collectives_ = verify_collectives_;
  }
  return *channel_;
}

int Comm::next_collective_tag() {
  return static_cast<int>(collective_ops_++ % (static_cast<std::uint64_t>(kMaxTag) + 1));
}

std::unique_ptr<Comm> Comm::split(int color, int key) {
  DTW_CHECK_ARG(color >= 0 || color == kNoColor,
                "rank " << rank_ << ": split with color " << color
                        << ": a color must be >= 0, or dtw::kNoColor (" << kNoColor << ")");
  // Allgather every rank's (color, key) around a ring: p-1 steps of one pair.
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  all[2 * rank_] = color;
  all[2 * rank_ + 1] = key;
  const int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
  for (int s = 0; s < size_ - 1; ++s) {
    const int send_block = (rank_ - s + size_) % size_;
    const int recv_block = (rank_ - s - 1 + size_) % size_;
    internal_sendrecv({&all[2 * send_block], 2, DataType::kInt64}, right,
                      {&all[2 * recv_block], 2, DataType::kInt64}, left, kSplitTag);
  }
  const std::uint64_t split_id = splits_++;
  if (color == kNoColor) {
    skip_subgroup(split_id);
    return nullptr;
  }
  std::vector<int> group;
  for (int r = 0; r < size_; ++r)
    if (all[2 * r] == color) group.push_back(r);
  std::stable_sort(group.begin(), group.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  return make_subgroup(group, color, split_id);
}

}  // namespace dtw
