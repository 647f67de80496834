#pragma once
/// @file
/// `dtw::Request`: the handle of one pending non-blocking point-to-point
/// operation (`Comm::isend`, `irecv`, `irecv_reduce`), and the state a backend
/// keeps behind it. Included by dtw/comm.h, which completes requests.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

namespace dtw {

class Comm;

namespace detail {
/// Backend-owned state of one non-blocking operation.
struct RequestState {
  virtual ~RequestState() = default;
  /// Called when the last handle is dropped while the operation is still
  /// pending: the backend withdraws it (or waits out a copy already running),
  /// so it never touches the caller's buffer afterwards.
  virtual void abandon() noexcept {}
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
  double start_work = -1;  ///< the tracer's work clock when posted (Tracer::work)
  const Comm* comm = nullptr;  ///< the communicator that started it (completes it)
  /// Local work to do once the operation completed, before the caller sees it
  /// complete (irecv_reduce's reduction, on backends that receive into scratch).
  std::function<void(RequestState&)> on_complete;
};
}  // namespace detail

/// Handle of a pending `isend`/`irecv`. Complete it with `Comm::wait` before
/// touching its buffer; a request still pending when its rank returns is an error.
///
/// A Request is move-only: it is the one owner of the operation. Destroying
/// (or assigning over) a request that is still pending abandons the operation:
/// it is withdrawn before it can read or write the buffer (if a copy is already
/// running, the destructor waits for it), a peer already matched with it fails,
/// and, unless the destruction happens while an exception unwinds or after the
/// launch already failed, the rank is reported at the end of the launch as
/// having returned with requests never waited for. This keeps an exception
/// thrown between `irecv` and `wait` from leaving a dangling buffer pointer.
class Request {
 public:
  Request() = default;
  /// Wraps the backend's state of a started operation (done by Comm, not by callers).
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  /// Takes over `other`'s operation; `other` becomes empty and moved-from.
  Request(Request&& other) noexcept
      : state_(std::move(other.state_)), moved_from_(std::exchange(other.moved_from_, true)) {}
  /// Abandons this request's pending operation (if any), then takes over `other`'s.
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      release();
      state_ = std::move(other.state_);
      moved_from_ = std::exchange(other.moved_from_, true);
    }
    return *this;
  }
  ~Request() { release(); }
  /// True until the request has been waited for.
  bool pending() const { return state_ && !state_->completed; }
  /// Elements received (valid after wait; 0 for sends).
  std::int64_t received_count() const { return state_ ? state_->received_count : 0; }
  /// The backend's state of the operation, or nullptr for an empty request.
  detail::RequestState* state() const { return state_.get(); }
  /// True when this request was moved from: its operation belongs to another
  /// Request now, and completing this one is a mistake (InvalidArgument).
  bool moved_from() const { return moved_from_; }

 private:
  void release() noexcept {
    if (pending()) state_->abandon();
    state_.reset();
  }
  std::shared_ptr<detail::RequestState> state_;
  bool moved_from_ = false;
};

}  // namespace dtw
