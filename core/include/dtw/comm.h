#pragma once
/// @file
/// `dtw::Comm`: the one interface lab and solution code talks to.
///
/// A Comm is a group of `size()` ranks; this object is one of them, `rank()`.
/// Messages are matched on (source, tag) and never overtake each other for the
/// same (source, tag). A blocking `send` is *synchronous*: it returns once the
/// receiver holds the data, so code that only works because a send happened to
/// be buffered fails on every run, not on some.

#include <concepts>
#include <cstdint>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <vector>

#include "dtw/trace.h"
#include "dtw/traffic.h"
#include "dtw/types.h"

namespace dtw {

/// Largest tag a caller may use; tags run from 0 to kMaxTag.
inline constexpr int kMaxTag = (1 << 30) - 1;
/// Color that makes `split` return no communicator for this rank.
inline constexpr int kNoColor = -1;

namespace detail {
/// Backend-owned state of one non-blocking operation.
struct RequestState {
  virtual ~RequestState() = default;
  bool completed = false;
  std::int64_t received_count = 0;  ///< elements that arrived (receives only)
  // What the trace and traffic counters record when the request completes.
  const char* op = "";
  int peer = -1;
  int tag = 0;
  std::int64_t bytes = 0;        ///< sends: payload; receives: filled at completion
  std::int64_t elem_bytes = 1;   ///< bytes per element of the buffer
  bool is_send = false;
  double start_us = 0;
};

/// A contiguous range of dtw element types (vector, span, array, ...).
template <class R>
concept ElementRange = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                       kIsElement<std::remove_cv_t<std::ranges::range_value_t<R>>>;

template <ElementRange R>
ConstBuffer const_view(const R& r) {
  using T = std::remove_cv_t<std::ranges::range_value_t<R>>;
  return {std::ranges::data(r), static_cast<std::int64_t>(std::ranges::size(r)),
          data_type_of<T>()};
}
template <ElementRange R>
Buffer mutable_view(R&& r) {
  using T = std::ranges::range_value_t<R>;
  static_assert(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>,
                "a receive needs writable memory");
  return {std::ranges::data(r), static_cast<std::int64_t>(std::ranges::size(r)),
          data_type_of<T>()};
}
}  // namespace detail

/// Handle of a pending `isend`/`irecv`. Complete it with `Comm::wait` before
/// touching its buffer; a request still pending when its rank returns is an error.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  /// True until the request has been waited for.
  bool pending() const { return state_ && !state_->completed; }
  /// Elements received (valid after wait; 0 for sends).
  std::int64_t received_count() const { return state_ ? state_->received_count : 0; }
  detail::RequestState* state() const { return state_.get(); }

 private:
  std::shared_ptr<detail::RequestState> state_;
};

/// One rank's view of a communicator. Backends derive from it; code using it
/// never needs to know which backend runs underneath.
class Comm {
 public:
  virtual ~Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// This rank, in [0, size()).
  int rank() const { return rank_; }
  /// Number of ranks in the group.
  int size() const { return size_; }
  /// This rank's number in the whole launch (differs from rank() after split).
  int world_rank() const { return world_rank_of(rank_); }
  /// The world rank of group rank `r`.
  int world_rank_of(int r) const { return members_[static_cast<std::size_t>(r)]; }
  /// The backend's name ("threads", "mpi", "nccl").
  virtual const char* backend() const = 0;

  // ---- typed point-to-point -------------------------------------------------

  /// Sends `data` to `peer` with `tag` and returns once `peer` has received it.
  template <detail::ElementRange R>
  void send(const R& data, int peer, int tag = 0) {
    send_buffer(detail::const_view(data), peer, tag);
  }
  /// Receives into `data` from `peer` with `tag`; returns the element count that
  /// arrived (at most data.size(): a larger message is an InvalidArgument).
  template <detail::ElementRange R>
  std::int64_t recv(R&& data, int peer, int tag = 0) {
    return recv_buffer(detail::mutable_view(data), peer, tag);
  }
  /// Starts a send; `data` must stay untouched until `wait`.
  template <detail::ElementRange R>
  [[nodiscard]] Request isend(const R& data, int peer, int tag = 0) {
    return isend_buffer(detail::const_view(data), peer, tag);
  }
  /// Starts a receive; `data` must stay unread until `wait`.
  template <detail::ElementRange R>
  [[nodiscard]] Request irecv(R&& data, int peer, int tag = 0) {
    return irecv_buffer(detail::mutable_view(data), peer, tag);
  }
  /// Sends `out` to `dst` and receives `in` from `src` at the same time, so two
  /// ranks exchanging with each other never deadlock. Both use `tag`.
  template <detail::ElementRange S, detail::ElementRange R>
  std::int64_t sendrecv(const S& out, int dst, R&& in, int src, int tag = 0) {
    return sendrecv_buffer(detail::const_view(out), dst, detail::mutable_view(in), src, tag);
  }
  /// Receives a message from `src` and combines it into `inout` element-wise:
  /// `inout[i] = op(inout[i], message[i])`. The message must have exactly
  /// inout.size() elements. Backends that can read the sender's memory fuse the
  /// copy into the reduction (one pass over memory instead of two).
  template <detail::ElementRange R>
  void recv_reduce(R&& inout, int src, ReduceOp op, int tag = 0) {
    recv_reduce_buffer(detail::mutable_view(inout), src, op, tag);
  }

  // ---- untyped point-to-point (raw Buffer views; same semantics) ------------

  void send_buffer(ConstBuffer data, int peer, int tag);
  std::int64_t recv_buffer(Buffer data, int peer, int tag);
  [[nodiscard]] Request isend_buffer(ConstBuffer data, int peer, int tag);
  [[nodiscard]] Request irecv_buffer(Buffer data, int peer, int tag);
  std::int64_t sendrecv_buffer(ConstBuffer out, int dst, Buffer in, int src, int tag);
  void recv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag);

  // ---- completion and group operations --------------------------------------

  /// Waits until `request` completes; a no-op for an empty or completed one.
  void wait(Request& request);
  /// Waits for every request in `requests`.
  void wait_all(std::span<Request> requests);
  /// Returns once every rank of the group has entered barrier().
  void barrier();
  /// Collective: partitions the group by `color` (ranks ordered by `key`, ties
  /// by rank). Returns the new group, or nullptr for `kNoColor`.
  std::unique_ptr<Comm> split(int color, int key);

  // ---- observability ---------------------------------------------------------

  /// Bytes and messages this rank exchanged with each world rank.
  const Traffic& traffic() const { return *traffic_; }
  /// The trace this rank records into (no-op when tracing is off).
  Tracer& tracer() const { return *tracer_; }

 protected:
  /// `members[r]` is the world rank of group rank r.
  Comm(int rank, std::vector<int> members, std::shared_ptr<Traffic> traffic,
       std::shared_ptr<Tracer> tracer);

  // What a backend implements. Arguments arrive validated (peer in range, count
  // >= 0, tag in range), and `op_name` says which public call is running, for
  // error and deadlock reports.
  virtual std::shared_ptr<detail::RequestState> start_send(ConstBuffer data, int peer, int tag,
                                                           const char* op_name) = 0;
  virtual std::shared_ptr<detail::RequestState> start_recv(Buffer data, int peer, int tag,
                                                           const char* op_name) = 0;
  /// Receive + reduce. The default receives into a temporary and reduces.
  virtual void do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag);
  /// Blocks until every request in `states` completed.
  virtual void complete(std::span<detail::RequestState* const> states, const char* op_name) = 0;
  /// `group` lists the parent ranks of the new group in new-rank order.
  virtual std::unique_ptr<Comm> make_subgroup(const std::vector<int>& group, int color,
                                              std::uint64_t split_id) = 0;
  /// The default barrier is a dissemination barrier over messages with internal tags.
  virtual void do_barrier();

  /// Tags below 0 are reserved for the runtime's own messages (barrier, split).
  static constexpr int kBarrierTag = -1;
  static constexpr int kSplitTag = -2;
  /// Send/receive on a reserved tag (no range check, no traffic in the caller's name).
  void internal_sendrecv(ConstBuffer out, int dst, Buffer in, int src, int tag);

  std::shared_ptr<Traffic> traffic_ptr() const { return traffic_; }
  std::shared_ptr<Tracer> tracer_ptr() const { return tracer_; }
  const std::vector<int>& members() const { return members_; }

 private:
  void check_peer(int peer, const char* op) const;
  void check_tag(int tag, const char* op) const;
  void check_count(std::int64_t count, const char* op) const;
  void finish(detail::RequestState& state);

  int rank_;
  int size_;
  std::vector<int> members_;
  std::shared_ptr<Traffic> traffic_;
  std::shared_ptr<Tracer> tracer_;
  std::uint64_t splits_ = 0;  // how many splits this rank has done: names the next one
};

}  // namespace dtw
