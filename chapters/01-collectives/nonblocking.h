#pragma once
/// @file
/// Chapter 01's non-blocking collectives: the ring allreduce, reduce-scatter
/// and allgather (also in place) in a form that returns at once with a handle, so a caller can
/// start a bucket's allreduce and keep computing (DDP overlaps backward with
/// it). They are in the SOLUTION library only -- chapters 02+ link it -- and are
/// not a lab step: the lab keeps the blocking API of collectives.h.
///
/// A collective in flight is a schedule of rounds (each round: the sends and
/// receives of one ring step); a round starts when the one before it has
/// completed. How that progress happens depends on the backend:
/// - threads: inside this rank's own calls. `test()` and `wait()` on any
///   collective of a communicator advance every collective in flight on it
///   (and do this rank's pending copies); between calls nothing moves.
/// - mpi: each round's messages move inside the MPI library, but the next
///   round is posted only inside `test()`/`wait()`.
/// - nccl: each round runs on the rank's GPU stream; `test()`/`wait()` launch
///   the next round once the stream has finished the last.
/// So a caller that overlaps computation should call `test()` now and then
/// (between layers), and `wait()` when it needs the result.
///
/// Every collective takes its tag from the communicator's operation counter
/// and runs in its collective channel (Comm::collective_channel), so several
/// may be in flight on one communicator and be completed in any order -- the
/// same order on every rank, as every collective requires -- without taking
/// each other's (or the caller's) messages.

#include <memory>
#include <span>

#include "collectives.h"
#include "dtw/comm.h"

namespace dtw::ch01 {

namespace detail {
struct Schedule;  // a collective's rounds (nonblocking.cpp)
}  // namespace detail

/// Handle of a collective in flight. Move-only. Destroying one that is still
/// pending abandons its messages, which is reported like an abandoned Request
/// (the rank fails with "requests never waited for").
class PendingCollective {
 public:
  PendingCollective();
  explicit PendingCollective(std::unique_ptr<detail::Schedule> schedule);
  PendingCollective(PendingCollective&&) noexcept;
  PendingCollective& operator=(PendingCollective&&) noexcept;
  ~PendingCollective();
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;

  /// Advances every collective in flight on this one's communicator as far as
  /// it can without blocking; true once this one is complete. It polls with
  /// Comm::test, so polling one that can never complete (a peer that never
  /// joins) ends at the launch timeout as Comm::test does, naming the rank
  /// and the message of the round it is stuck in.
  bool test();
  /// Blocks until this collective is complete, advancing the others in flight
  /// on its communicator meanwhile. A no-op once complete (or for an empty handle).
  void wait();
  /// True once complete (or for an empty handle).
  bool done() const;

 private:
  std::unique_ptr<detail::Schedule> schedule_;
};

/// allreduce(comm, data, op, algo), started: `data` must stay untouched until
/// done. Non-blocking forms exist for AllreduceAlgo::kRing; other algorithms
/// are an InvalidArgument.
template <NumericElement T>
[[nodiscard]] PendingCollective iallreduce(Comm& comm, std::span<T> data, ReduceOp op,
                                           AllreduceAlgo algo = AllreduceAlgo::kRing);

/// reduce_scatter(comm, data, out, op, algo), started (kRing only).
template <NumericElement T>
[[nodiscard]] PendingCollective ireduce_scatter(Comm& comm, std::span<T> data, std::span<T> out,
                                                ReduceOp op,
                                                ReduceScatterAlgo algo = ReduceScatterAlgo::kRing);

/// allgather(comm, in, out, algo), started (kRing only).
template <NumericElement T>
[[nodiscard]] PendingCollective iallgather(Comm& comm, std::span<const T> in, std::span<T> out,
                                           AllgatherAlgo algo = AllgatherAlgo::kRing);

/// allgather_in_place(comm, data, algo), started (kRing only): rank r's chunk
/// r of Chunks(data.size(), p) is in `data` already, the chunks may be uneven
/// (p need not divide the count), and every other chunk arrives in place.
/// `data` must stay untouched until done. ZeRO-3 gathers a unit's parameters
/// ahead of their use with it (chapter 04, step 04.4).
template <NumericElement T>
[[nodiscard]] PendingCollective iallgather_in_place(Comm& comm, std::span<T> data,
                                                    AllgatherAlgo algo = AllgatherAlgo::kRing);

}  // namespace dtw::ch01
