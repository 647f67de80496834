#pragma once
/// @file
/// `dtw::Comm`: the one interface lab and solution code talks to.
///
/// A Comm is a group of `size()` ranks; this object is one of them, `rank()`.
/// Messages are matched on (source, tag) and never overtake each other for the
/// same (source, tag). A blocking `send` is *synchronous*: it returns once the
/// receiver holds the data, so code that only works because a send happened to
/// be buffered fails on every run, not on some.
///
/// Include this header: it brings the parts that have headers of their own,
/// dtw/request.h (Request), dtw/element_range.h (the ranges the typed calls
/// accept), dtw/collective_call.h (the fingerprint check's record) and
/// dtw/comm_typed.h (the typed calls' bodies).

#include <cstdint>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>
#include <vector>

#include "dtw/collective_call.h"
#include "dtw/element_range.h"
#include "dtw/exec.h"
#include "dtw/request.h"
#include "dtw/trace.h"
#include "dtw/traffic.h"
#include "dtw/types.h"

namespace dtw {

/// Largest tag a caller may use; tags run from 0 to kMaxTag.
inline constexpr int kMaxTag = (1 << 30) - 1;
/// Color that makes `split` return no communicator for this rank.
inline constexpr int kNoColor = -1;

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
  /// Where this rank's memory lives and work runs, with the rank's memory
  /// ledger: the host on the threads and mpi backends, the rank's GPU and
  /// stream on nccl and on threads launched with LaunchOptions::device
  /// "cuda". Make a rank's Arrays here: `Array<float> a(comm.exec(), n);`
  const Exec& exec() const { return exec_; }

  // ---- typed point-to-point -------------------------------------------------
  // Buffers are host memory on the CPU backends. The nccl backend moves device
  // (or managed) memory at NCCL's speed and stages host memory through a device
  // buffer: two extra copies per message, so timings of host buffers there
  // measure staged transfers. Threads with device buffers (LaunchOptions::
  // device "cuda") copy between any mix of host and device memory on the
  // receiver's stream, after the work the sender queued before its send.

  /// Sends `data` to `peer` with `tag` and returns once `peer` has received it.
  template <detail::ElementRange R>
  void send(const R& data, int peer, int tag = 0);
  /// Receives into `data` from `peer` with `tag`; returns the element count that
  /// arrived (at most data.size(): a larger message is an InvalidArgument).
  template <detail::ElementRange R>
  std::int64_t recv(R&& data, int peer, int tag = 0);
  /// Starts a send; `data` must stay untouched until `wait`.
  template <detail::ElementRange R>
  [[nodiscard]] Request isend(const R& data, int peer, int tag = 0);
  /// A temporary container as the buffer of a non-blocking call is rejected at
  /// compile time: it would be destroyed before `wait`. (Views such as std::span
  /// are fine: they do not own their memory.)
  template <detail::ElementRange R>
    requires(!std::is_lvalue_reference_v<R> && !std::ranges::borrowed_range<R>)
  Request isend(R&& data, int peer, int tag = 0);
  /// Starts a receive; `data` must stay unread until `wait`.
  template <detail::ElementRange R>
  [[nodiscard]] Request irecv(R&& data, int peer, int tag = 0);
  /// Sends `out` to `dst` and receives `in` from `src` at the same time, so two
  /// ranks exchanging with each other never deadlock. Both use `tag`.
  template <detail::ElementRange S, detail::ElementRange R>
  std::int64_t sendrecv(const S& out, int dst, R&& in, int src, int tag = 0);
  /// Receives a message from `src` and combines it into `inout` element-wise:
  /// `inout[i] = op(inout[i], message[i])`. The message must have exactly
  /// inout.size() elements. Backends that can read the sender's memory fuse the
  /// copy into the reduction (one pass over memory instead of two).
  template <detail::ElementRange R>
  void recv_reduce(R&& inout, int src, ReduceOp op, int tag = 0);

  /// Starts a receive from `src` that combines the message into `inout`
  /// (`inout[i] = op(inout[i], message[i])`, exactly inout.size() elements) by
  /// the time the request completes: the non-blocking recv_reduce. `inout`
  /// must stay untouched until then. The threads backend fuses the reduction
  /// into the copy; the others receive into scratch and reduce on completion.
  template <detail::ElementRange R>
  [[nodiscard]] Request irecv_reduce(R&& inout, int src, ReduceOp op, int tag = 0);

  // ---- untyped point-to-point (raw Buffer views; same semantics) ------------

  /// `send` on an untyped view.
  void send_buffer(ConstBuffer data, int peer, int tag);
  /// `recv` on an untyped view; returns the element count that arrived.
  std::int64_t recv_buffer(Buffer data, int peer, int tag);
  /// `isend` on an untyped view.
  [[nodiscard]] Request isend_buffer(ConstBuffer data, int peer, int tag);
  /// `irecv` on an untyped view.
  [[nodiscard]] Request irecv_buffer(Buffer data, int peer, int tag);
  /// `sendrecv` on untyped views; returns the element count that arrived.
  std::int64_t sendrecv_buffer(ConstBuffer out, int dst, Buffer in, int src, int tag);
  /// `recv_reduce` on an untyped view.
  void recv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag);
  /// `irecv_reduce` on an untyped view.
  [[nodiscard]] Request irecv_reduce_buffer(Buffer inout, int src, ReduceOp op, int tag);

  // ---- local operations on this rank's memory ---------------------------------
  // Touching message data on the host (std::copy, a loop) works on the CPU
  // backends but crashes on device memory. These run wherever the backend keeps
  // its buffers (a memcpy on the host, a CUDA copy or kernel on the GPU) and
  // return once done, so code written against Comm stays backend-independent.

  /// Copies `src` into `dst` on this rank; no message moves. Both must have the
  /// same type and count (InvalidArgument otherwise); a copy onto itself is a
  /// no-op. Other partial overlaps are allowed.
  void copy_local(Buffer dst, ConstBuffer src);
  /// `copy_local` on typed ranges of the same element type and size.
  template <detail::ElementRange D, detail::ElementRange S>
  void copy_local(D&& dst, const S& src);
  /// Divides every element of `data` by `divisor` in place (integer division,
  /// truncating, for integer types): what ReduceOp::kAvg adds to a sum.
  /// `divisor` must be positive and `data` not raw bytes (InvalidArgument).
  void divide_local(Buffer data, int divisor);
  /// `inout[i] = op(inout[i], in[i])` on this rank (kAvg reduces as kSum);
  /// same type and count, not raw bytes (InvalidArgument otherwise).
  void reduce_local(Buffer inout, ConstBuffer in, ReduceOp op);
  /// `reduce_local` on typed ranges of the same element type and size.
  template <detail::ElementRange D, detail::ElementRange S>
  void reduce_local(D&& inout, const S& in, ReduceOp op);
  /// `divide_local` on a typed range.
  template <detail::ElementRange R>
  void divide_local(R&& data, int divisor);

  // ---- completion and group operations --------------------------------------

  // A request is completed on the communicator that started it (another one's
  // request is an InvalidArgument), and never through a Request it was moved
  // out of (InvalidArgument: the operation belongs to the other Request now).

  /// Waits until `request` completes; a no-op for an empty or completed one.
  void wait(Request& request);
  /// Waits for every request in `requests`.
  void wait_all(std::span<Request> requests);
  /// Completes `request` if it can without blocking and says whether it did
  /// (true for an empty or already completed request). Never blocks: on the
  /// threads backend it also does the copies queued for this rank, so a rank
  /// that polls makes progress. A polling rank is running, not blocked: the
  /// threads backend's deadlock detector never counts it as stuck. But one that
  /// has polled for the launch timeout with no operation of its own completing
  /// (and none posted, no blocking call) is treated as a blocked rank past the
  /// timeout: on threads this call throws TimeoutError with the wait-for report
  /// ("polling with test ... for N ms" and the operation: peer, tag, bytes); on
  /// MPI the watchdog's report for the job shows rank R "polling with test"
  /// and "polls for: irecv from rank P, tag T, B bytes", and aborts the job. The cost of a poll stays O(1).
  bool test(Request& request);
  /// Blocks until at least one pending request in `requests` completes,
  /// completes it and returns its index; the others stay pending. Requests
  /// that are empty or already completed are skipped; when none is pending
  /// (an empty span included) returns requests.size() at once. On the threads
  /// backend a rank blocked here waits for *any* of its requests: the deadlock
  /// detector reports a cycle through it only when none of them can complete.
  std::size_t wait_any(std::span<Request> requests);
  /// Like wait_any, but completes every pending request that can complete by
  /// the time one has, and returns their indices in increasing order (empty
  /// when none is pending).
  std::vector<std::size_t> wait_some(std::span<Request> requests);
  /// Returns once every rank of the group has entered barrier().
  void barrier();
  /// Collective: partitions the group by `color` (ranks ordered by `key`, ties
  /// by rank). Returns the new group, or nullptr for `kNoColor`.
  std::unique_ptr<Comm> split(int color, int key);
  /// Collective: the same group in a new context. Messages never cross between
  /// the two communicators, whatever their tags, so a library can talk on its
  /// own duplicate while the caller's messages are in flight. Every rank must
  /// call it (as every collective) in the same order. AbortedError when the
  /// launch is failing.
  std::unique_ptr<Comm> dup();

  // ---- the context collectives run in ----------------------------------------
  // Collectives built from point-to-point (chapter 01's) must never take a
  // message meant for the caller's own point-to-point, nor one meant for
  // another collective still in flight. So they run on this communicator's
  // collective channel -- the same group in a context of its own, as MPI
  // gives its collectives -- with a tag from a per-communicator operation
  // counter (as gloo's slots do): two collectives in flight on one
  // communicator have different tags, and no legal user tag reaches either.

  /// The communicator collectives run on: this group in a private context,
  /// made on first use (collectively: the first collective every rank calls)
  /// and kept for this communicator's life. A channel is its own channel.
  Comm& collective_channel();
  /// The tag of the next collective operation on this communicator: 0, 1, 2,
  /// ... wrapping after kMaxTag. Ranks that start their collectives in the
  /// same order (which every collective requires) get the same tags.
  int next_collective_tag();
  /// True on a collective channel (collective_channel()): its tags number
  /// collective operations, not user messages, and reports say so.
  bool is_collective_channel() const { return is_channel_; }

  // ---- reference collectives --------------------------------------------------
  // The backend's trusted implementations that tests and benchmarks compare the
  // learner's algorithms against: threads runs a plain fixed-order algorithm
  // (gather to rank 0, reduce in rank order, send back: bitwise reproducible);
  // mpi calls MPI's own collectives; nccl calls NCCL's. Reductions are in place.
  // Chunked results (reduce_scatter) use dtw::Chunks(count, size()).

  /// `data` on every rank becomes the element-wise reduction over all ranks.
  virtual void reference_allreduce(Buffer data, ReduceOp op);
  /// `data` on every rank becomes root's `data`.
  virtual void reference_broadcast(Buffer data, int root);
  /// Root's `data` becomes the reduction over all ranks; others' is unspecified after.
  virtual void reference_reduce(Buffer data, ReduceOp op, int root);
  /// `out` (size() * in.count elements) receives every rank's `in`, in rank order.
  virtual void reference_allgather(ConstBuffer in, Buffer out);
  /// Reduces `in` over all ranks and leaves chunk rank() of the result in `out`
  /// (Chunks(in.count, size()).size(rank()) elements).
  virtual void reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op);
  /// Block j of `in` (in.count / size() elements) goes to rank j; `out` block i comes from rank i.
  virtual void reference_alltoall(ConstBuffer in, Buffer out);
  /// Root's `out` (size() * in.count elements) receives every rank's `in` in rank order.
  virtual void reference_gather(ConstBuffer in, Buffer out, int root);
  /// Block i of root's `in` (size() * out.count elements) goes to rank i's `out`.
  virtual void reference_scatter(ConstBuffer in, Buffer out, int root);

  // ---- collective fingerprint check ------------------------------------------

  /// What a rank says it is calling, for `verify_collective` (dtw/collective_call.h).
  using CollectiveCall = ::dtw::CollectiveCall;
  /// When the fingerprint check is on (debug builds, or DTW_CHECK_COLLECTIVES=1
  /// in the environment, or set_verify_collectives(true)), exchanges `call` with
  /// every rank of the group first and throws CollectiveMismatch naming the
  /// disagreeing ranks and what each called. A no-op when the check is off.
  void verify_collective(const CollectiveCall& call);
  /// Turns the fingerprint check on or off for this communicator.
  void set_verify_collectives(bool on) { verify_collectives_ = on; }
  /// True when the fingerprint check is on for this communicator.
  bool verify_collectives() const { return verify_collectives_; }

  // ---- observability ---------------------------------------------------------

  /// Bytes and messages this rank exchanged with each world rank.
  const Traffic& traffic() const { return *traffic_; }
  /// The trace this rank records into (no-op when tracing is off).
  Tracer& tracer() const { return *tracer_; }

 protected:
  /// `members[r]` is the world rank of group rank r.
  Comm(int rank, std::vector<int> members, std::shared_ptr<Traffic> traffic,
       std::shared_ptr<Tracer> tracer, Exec exec);

  // What a backend implements. Arguments arrive validated (peer in range, count
  // >= 0, tag in range), and `op_name` says which public call is running, for
  // error and deadlock reports.
  /// Starts a send of `data` to group rank `peer`; completes once the receiver has it.
  virtual std::shared_ptr<detail::RequestState> start_send(ConstBuffer data, int peer, int tag,
                                                           const char* op_name) = 0;
  /// Starts a receive into `data` from group rank `peer`.
  virtual std::shared_ptr<detail::RequestState> start_recv(Buffer data, int peer, int tag,
                                                           const char* op_name) = 0;
  /// Receive + reduce. The default receives into a temporary and reduces.
  virtual void do_recv_reduce(Buffer inout, int src, ReduceOp op, int tag);
  /// Starts a receive that reduces into `inout` by completion. The default
  /// receives into scratch on exec() and reduces with do_reduce_local from
  /// the request's on_complete.
  virtual std::shared_ptr<detail::RequestState> start_recv_reduce(Buffer inout, int src,
                                                                  ReduceOp op, int tag,
                                                                  const char* op_name);
  /// `inout[i] = op(inout[i], in[i])` on host memory (the reduce kernel);
  /// arguments arrive checked, count > 0. Device backends override.
  virtual void do_reduce_local(Buffer inout, ConstBuffer in, ReduceOp op);
  /// Blocks until every request in `states` completed.
  virtual void complete(std::span<detail::RequestState* const> states, const char* op_name) = 0;
  /// Blocks until at least one request in `states` (none completed yet, at
  /// least one given) completed; returns the index of one that did.
  virtual std::size_t complete_any(std::span<detail::RequestState* const> states,
                                   const char* op_name) = 0;
  /// Without blocking: true once `state` has completed, after any progress the
  /// backend makes in the caller's thread. Throws what complete() would for it.
  virtual bool poll(detail::RequestState* state, const char* op_name) = 0;
  /// The same group in a new context (for dup, and for the collective channel
  /// when `channel`); `dup_id` numbers this communicator's dups, like split_id.
  virtual std::unique_ptr<Comm> make_dup(std::uint64_t dup_id, bool channel) = 0;
  /// `group` lists the parent ranks of the new group in new-rank order.
  virtual std::unique_ptr<Comm> make_subgroup(const std::vector<int>& group, int color,
                                              std::uint64_t split_id) = 0;
  /// Called by `split` on a rank that passed kNoColor, in place of make_subgroup,
  /// after the same exchange of colors and keys. For backends whose library
  /// splits collectively over the whole parent (ncclCommSplit takes every rank,
  /// NCCL_SPLIT_NOCOLOR included); the default does nothing.
  virtual void skip_subgroup(std::uint64_t /*split_id*/) {}
  /// The default barrier is a dissemination barrier over messages with internal tags.
  virtual void do_barrier();
  /// Copies between two equally typed, equally long host buffers (memmove);
  /// arguments arrive checked, count > 0 and dst != src. Device backends override.
  virtual void do_copy_local(Buffer dst, ConstBuffer src);
  /// Divides a host buffer element-wise by `divisor` (> 1, not raw bytes).
  virtual void do_divide_local(Buffer data, int divisor);
  /// Called on entry to every `verify_collective`, whether the fingerprint check
  /// is on or off, so a backend can note which collectives a rank entered (the
  /// mpi backend's hang watchdog lists them). The default does nothing.
  virtual void on_collective(const CollectiveCall& /*call*/) {}

  /// Tags below 0 are reserved for the runtime's own messages (barrier, split).
  static constexpr int kBarrierTag = -1;
  /// Reserved tag of split's exchange of colors and keys.
  static constexpr int kSplitTag = -2;
  /// Reserved tag of the reference collectives.
  static constexpr int kReferenceTag = -3;
  /// Reserved tag of the collective fingerprint check.
  static constexpr int kFingerprintTag = -4;
  /// Send/receive on a reserved tag (no range check, no traffic in the caller's name).
  void internal_sendrecv(ConstBuffer out, int dst, Buffer in, int src, int tag);
  /// Blocking send on a reserved tag; `op_name` names it in deadlock reports.
  void internal_send(ConstBuffer data, int dst, int tag, const char* op_name);
  /// Blocking receive on a reserved tag; returns the element count that arrived.
  std::int64_t internal_recv(Buffer data, int src, int tag, const char* op_name);

  /// This rank's traffic counters, for sharing with a sub-communicator.
  std::shared_ptr<Traffic> traffic_ptr() const { return traffic_; }
  /// This rank's tracer, for sharing with a sub-communicator.
  std::shared_ptr<Tracer> tracer_ptr() const { return tracer_; }
  /// World ranks of the group's members, indexed by group rank.
  const std::vector<int>& members() const { return members_; }
  /// Raises InvalidArgument naming this rank and `call` unless `op` is a
  /// ReduceOp enumerator (an integer cast out of range would reduce garbage).
  void check_op(ReduceOp op, const char* call) const;
  /// Likewise for an element type (a Buffer whose `type` was cast from an integer).
  void check_type(DataType type, const char* call) const;

 private:
  // A device Array must live where this communicator runs (host Arrays are
  // fine everywhere: the nccl backend stages them).
  template <class R>
  void check_place(const R& data, const char* call) const {
    if constexpr (detail::HasExec<std::remove_cvref_t<R>>) check_exec(data.exec(), call);
  }
  void check_exec(const Exec& where, const char* call) const;
  void check_request(const Request& request, std::size_t index, const char* call) const;
  void complete_one(detail::RequestState& state);
  static const char* internal_call_name(int tag);
  void check_peer(int peer, const char* op) const;
  void check_tag(int tag, const char* op) const;
  void check_count(std::int64_t count, const char* op) const;
  void finish(detail::RequestState& state);
  // Post and complete under the name of the public call (`call`), so deadlock
  // reports and traces say "recv" or "sendrecv" rather than "irecv" and "wait".
  Request post_send(ConstBuffer data, int peer, int tag, const char* call);
  Request post_recv(Buffer data, int peer, int tag, const char* call);
  void complete_requests(std::span<Request> requests, const char* call);

  int rank_;
  int size_;
  std::vector<int> members_;
  std::shared_ptr<Traffic> traffic_;
  std::shared_ptr<Tracer> tracer_;
  Exec exec_;
  std::uint64_t splits_ = 0;  // how many splits this rank has done: names the next one
  std::uint64_t dups_ = 0;    // how many dups: names the next one
  std::uint64_t collective_ops_ = 0;     // the operation counter behind next_collective_tag
  std::unique_ptr<Comm> channel_;        // the collective channel, once made
  bool is_channel_ = false;              // this communicator is a collective channel
  int trace_channel_ = -1;               // a channel's number in the trace (TraceEvent::channel)
  bool verify_collectives_;   // initialised from the build type and DTW_CHECK_COLLECTIVES
};

}  // namespace dtw

// The typed calls' bodies, after the class they belong to.
#include "dtw/comm_typed.h"  // IWYU pragma: export
