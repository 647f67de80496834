// The backend-independent half of Comm: argument checks, traffic counters and
// trace events, and the operations built from point-to-point (barrier, split,
// the fallback recv_reduce). Backends only move bytes.
#include "dtw/comm.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"

namespace dtw {

Comm::Comm(int rank, std::vector<int> members, std::shared_ptr<Traffic> traffic,
           std::shared_ptr<Tracer> tracer)
    : rank_(rank),
      size_(static_cast<int>(members.size())),
      members_(std::move(members)),
      traffic_(std::move(traffic)),
      tracer_(std::move(tracer)) {}

void Comm::check_peer(int peer, const char* op) const {
  DTW_CHECK_ARG(peer >= 0 && peer < size_, "rank " << rank_ << ": " << op << " with peer " << peer
                                                   << ": peer out of range [0, " << size_ << ")");
}

void Comm::check_tag(int tag, const char* op) const {
  DTW_CHECK_ARG(tag >= 0 && tag <= kMaxTag, "rank " << rank_ << ": " << op << " with tag " << tag
                                                    << ": tag out of range [0, " << kMaxTag << "]");
}

void Comm::check_count(std::int64_t count, const char* op) const {
  DTW_CHECK_ARG(count >= 0, "rank " << rank_ << ": " << op << " with count " << count
                                    << ": count is negative");
}

Request Comm::isend_buffer(ConstBuffer data, int peer, int tag) {
  check_peer(peer, "isend");
  check_tag(tag, "isend");
  check_count(data.count, "isend");
  auto state = start_send(data, peer, tag, "isend");
  state->op = "isend";
  state->is_send = true;
  state->peer = peer;
  state->tag = tag;
  state->bytes = data.bytes();
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  return Request(std::move(state));
}

Request Comm::irecv_buffer(Buffer data, int peer, int tag) {
  check_peer(peer, "irecv");
  check_tag(tag, "irecv");
  check_count(data.count, "irecv");
  auto state = start_recv(data, peer, tag, "irecv");
  state->op = "irecv";
  state->elem_bytes = static_cast<std::int64_t>(size_of(data.type));
  state->peer = peer;
  state->tag = tag;
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  return Request(std::move(state));
}

// Counts the message and records the trace event once a request completed.
void Comm::finish(detail::RequestState& state) {
  const int peer = world_rank_of(state.peer);
  if (!state.is_send) state.bytes = state.received_count * state.elem_bytes;
  if (state.is_send) {
    traffic_->bytes_sent[peer] += state.bytes;
    traffic_->messages_sent[peer] += 1;
  } else {
    traffic_->bytes_received[peer] += state.bytes;
    traffic_->messages_received[peer] += 1;
  }
  if (tracer_->enabled()) tracer_->comm_event(state.op, peer, state.bytes, state.tag, state.start_us);
}

void Comm::wait(Request& request) { wait_all(std::span<Request>(&request, 1)); }

void Comm::wait_all(std::span<Request> requests) {
  std::vector<detail::RequestState*> pending;
  for (Request& r : requests)
    if (r.pending()) pending.push_back(r.state());
  if (pending.empty()) return;
  complete(pending, pending.size() == 1 ? "wait" : "wait_all");
  for (detail::RequestState* s : pending) {
    s->completed = true;
    finish(*s);
  }
}

void Comm::send_buffer(ConstBuffer data, int peer, int tag) {
  check_peer(peer, "send");
  check_tag(tag, "send");
  check_count(data.count, "send");
  auto state = start_send(data, peer, tag, "send");
  state->op = "send";
  state->is_send = true;
  state->peer = peer;
  state->tag = tag;
  state->bytes = data.bytes();
  state->start_us = tracer_->enabled() ? tracer_->now_us() : 0;
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), "send");
  state->completed = true;
  finish(*state);
}

std::int64_t Comm::recv_buffer(Buffer data, int peer, int tag) {
  Request r = irecv_buffer(data, peer, tag);
  r.state()->op = "recv";
  wait(r);
  return r.received_count();
}

std::int64_t Comm::sendrecv_buffer(ConstBuffer out, int dst, Buffer in, int src, int tag) {
  // Post the receive first so that the peer's send can land at once.
  std::array<Request, 2> requests{irecv_buffer(in, src, tag), isend_buffer(out, dst, tag)};
  requests[0].state()->op = "sendrecv";
  requests[1].state()->op = "sendrecv";
  wait_all(requests);
  return requests[0].received_count();
}

void Comm::recv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag) {
  check_peer(src, "recv_reduce");
  check_tag(tag, "recv_reduce");
  check_count(inout.count, "recv_reduce");
  DTW_CHECK_ARG(inout.type != DataType::kByte,
                "rank " << rank_ << ": recv_reduce from rank " << src << ": cannot reduce raw bytes");
  const double start = tracer_->enabled() ? tracer_->now_us() : 0;
  do_recv_reduce(inout, src, op, tag);
  traffic_->bytes_received[world_rank_of(src)] += inout.bytes();
  traffic_->messages_received[world_rank_of(src)] += 1;
  if (tracer_->enabled())
    tracer_->comm_event("recv_reduce", world_rank_of(src), inout.bytes(), tag, start);
}

void Comm::do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag) {
  // Two passes over memory: receive into scratch, then combine.
  std::vector<std::byte> scratch(static_cast<std::size_t>(inout.bytes()));
  Buffer tmp{scratch.data(), inout.count, inout.type};
  auto state = start_recv(tmp, src, tag, "recv_reduce");
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), "recv_reduce");
  DTW_CHECK_ARG(state->received_count == inout.count,
                "rank " << rank_ << ": recv_reduce from rank " << src << " tag " << tag << ": got "
                        << state->received_count << " elements, expected " << inout.count);
  kernels::reduce_into(inout, tmp, op);
}

void Comm::internal_sendrecv(ConstBuffer out, int dst, Buffer in, int src, int tag) {
  auto r = start_recv(in, src, tag, "barrier");
  auto s = start_send(out, dst, tag, "barrier");
  std::array<detail::RequestState*, 2> both{r.get(), s.get()};
  complete(both, "barrier");
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
  if (color == kNoColor) return nullptr;
  std::vector<int> group;
  for (int r = 0; r < size_; ++r)
    if (all[2 * r] == color) group.push_back(r);
  std::stable_sort(group.begin(), group.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  return make_subgroup(group, color, split_id);
}

}  // namespace dtw
