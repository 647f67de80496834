// Blocking and completion in the threads backend: a rank waits for its
// operations (spinning briefly, then sleeping), and the deadlock detector
// (a count of stuck ranks; the world walked only when every live rank is
// stuck) or the launch timeout ends a wait that can never complete.
#include <immintrin.h>

#include <algorithm>
#include <exception>
#include <optional>

#include "dtw/errors.h"
#include "threads/describe.h"
#include "threads/fibers.h"
#include "threads/threads_world.h"

namespace dtw::threads {
namespace {
// How long a waiting rank spins before it sleeps on its condition variable.
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

bool World::can_progress(int rank) const {
  const RankState& r = ranks_[rank];
  if (!r.copy_jobs.empty()) return true;
  return std::any_of(r.waiting_on.begin(), r.waiting_on.end(),
                     [](const Op* op) { return op->state == Op::State::kDone; });
}

void World::declare_deadlock() {
  deadlocked_ = true;
  deadlock_report_ = wait_graph("deadlock: every live rank is blocked and none can make progress");
  for (int r = 0; r < size_; ++r) wake(r);
}

void World::fail_timeout(int rank, const char* headline) {
  RankState& me = ranks_[rank];
  std::string graph = wait_graph(headline);
  stop_waiting(me);
  me.polled = nullptr;
  aborted_ = true;
  abort_rank_ = rank;
  abort_kind_ = "TimeoutError";
  for (int r = 0; r < size_; ++r) wake(r);
  throw TimeoutError(graph);
}

bool World::all_live_stuck() const {
  bool any_live = false;
  for (int r = 0; r < size_; ++r) {
    const RankState& s = ranks_[r];
    if (s.finished) continue;
    any_live = true;
    if (!s.waiting || can_progress(r)) return false;
  }
  return any_live;
}

void World::quiesce(int rank, std::unique_lock<std::mutex>& lock) {
  RankState& me = ranks_[rank];
  await(rank, lock, [&] { return me.copies_in_flight == 0; });
}

void World::await(int rank, std::unique_lock<std::mutex>& lock,
                  const std::function<bool()>& done) {
  RankState& me = ranks_[rank];
  notify_pending(lock, true);
  if (!fibers_) {
    me.cv.wait(lock, done);
    return;
  }
  // Whoever changes what `done` reads does so under mu_ and wakes this rank
  // (mark_done), so reading wake_seq under mu_ first loses no wake-up.
  while (!done())
    sleep(rank, lock, me.wake_seq.load(std::memory_order_acquire), Clock::time_point::max());
}

void World::sleep(int rank, std::unique_lock<std::mutex>& lock, std::uint64_t seen,
                  Clock::time_point deadline) {
  RankState& me = ranks_[rank];
  if (!fibers_) {
    me.cv.wait_until(lock, deadline, [&] { return me.wake_seq.load() != seen; });
    return;
  }
  // Never park holding mu_: the fibers run next on this worker need it.
  notify_pending(lock, false);
  fibers_->park(rank, me.wake_seq, seen, deadline);
  lock.lock();
}

void World::throw_if_failed(int rank, std::unique_lock<std::mutex>& lock) {
  if (!aborted_ && !deadlocked_) return;
  stop_waiting(ranks_[rank]);
  quiesce(rank, lock);
  if (deadlocked_) throw DeadlockError(deadlock_report_);
  throw AbortedError("call cancelled because rank " + std::to_string(abort_rank_) +
                     " failed first (" + abort_kind_ + ")");
}

void World::throw_op_error(const Op& op) {
  if (op.error.empty()) return;
  if (op.error_is_abort) throw AbortedError(op.error);
  throw InvalidArgument(op.error);
}

// Copies of large messages into this rank's receive buffers: done by the
// receiver, in its own wait or test, outside the lock.
void World::run_copy_jobs(int rank, std::unique_lock<std::mutex>& lock) {
  RankState& me = ranks_[rank];
  if (me.copy_jobs.empty()) return;
  std::vector<std::shared_ptr<Op>> jobs;
  jobs.swap(me.copy_jobs);
  for (auto& job : jobs) ++ranks_[job->partner->owner].copies_in_flight;
  me.copies_in_flight += static_cast<int>(jobs.size());
  lock.unlock();
  for (auto& job : jobs) transfer(*job->partner, *job);
  lock.lock();
  for (auto& job : jobs) {
    --ranks_[job->partner->owner].copies_in_flight;
    --me.copies_in_flight;
    mark_done(*job->partner);
    mark_done(*job);
  }
}

std::size_t World::complete(int rank, std::span<Op* const> ops, const char* call, bool any) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  RankState& me = ranks_[rank];
  me.polled = nullptr;
  // The clock is read only once the rank has to wait: most calls of a busy
  // world find their operations done already.
  std::optional<Clock::time_point> start;
  const auto is_done = [](const Op* op) { return op->state == Op::State::kDone; };
  for (;;) {
    stop_waiting(me);
    // This rank's own outcome first: an operation that completed (or failed on
    // its own bad match) reports that, even if another rank has failed since.
    if (any) {
      const auto it = std::find_if(ops.begin(), ops.end(), is_done);
      if (it != ops.end()) {
        throw_op_error(**it);
        return static_cast<std::size_t>(it - ops.begin());
      }
    } else if (std::all_of(ops.begin(), ops.end(), is_done)) {
      for (const Op* op : ops) throw_op_error(*op);
      return 0;
    }
    throw_if_failed(rank, lock);
    if (!me.copy_jobs.empty()) {
      run_copy_jobs(rank, lock);
      continue;
    }
    // Nothing to do: record what this rank waits for, then look for a deadlock.
    // can_progress() asks whether *any* op in waiting_on is done: exact for
    // wait_any (one is all it needs), and for a full wait it wakes the rank to
    // look again.
    const Clock::time_point now = Clock::now();
    if (!start) start = now;
    me.waiting = true;
    me.any = any;
    me.call = call;
    me.since = *start;
    me.waiting_on.clear();
    for (Op* op : ops)
      if (!is_done(op)) me.waiting_on.push_back(op);
    if (!can_progress(rank)) {
      me.stuck = true;
      ++stuck_;
    }
    if (stuck_ == live_ && all_live_stuck()) {
      declare_deadlock();
      continue;
    }
    const Clock::time_point deadline = *start + timeout_;
    if (now >= deadline)
      fail_timeout(rank, "timeout: a rank waited longer than the launch timeout");
    const std::uint64_t seq = me.wake_seq.load(std::memory_order_acquire);
    // Whoever this rank woke must run while it waits (a fiber's sleep()
    // sends them as it releases mu_).
    if (!to_wake_.empty() && !fibers_) notify_pending(lock, true);
    if (!oversubscribed_ && !fibers_) {
      // Spin briefly first: a wake-up through the condition variable costs
      // several microseconds, a message between two busy cores far less.
      lock.unlock();
      const Clock::time_point spin_end = Clock::now() + kSpin;
      while (me.wake_seq.load(std::memory_order_acquire) == seq && Clock::now() < spin_end)
        _mm_pause();
      lock.lock();
    }
    sleep(rank, lock, seq, deadline);
  }
}

bool World::test(int rank, Op& op, const char* call, bool polling) {
  const bool done = test_locked(rank, op, call, polling);
  // A fiber polling in a loop never blocks: without a yield the peer it polls
  // for, if on the same worker, would never run.
  if (!done && polling && fibers_) fibers_->yield(rank);
  return done;
}

bool World::test_locked(int rank, Op& op, const char* call, bool polling) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  RankState& me = ranks_[rank];
  run_copy_jobs(rank, lock);
  if (op.state == Op::State::kDone) {
    // A poll that completes is progress too (the op may have been done since
    // long before): the poll clock restarts, as on MPI, where only a test sees it.
    me.polled = nullptr;
    throw_op_error(op);
    return true;
  }
  throw_if_failed(rank, lock);
  if (!polling) return false;
  const Clock::time_point now = Clock::now();
  if (me.polled == nullptr) {
    me.polled = &op;
    me.call = call;
    me.polling_since = now;
  } else if (now - me.polling_since >= timeout_) {
    fail_timeout(rank, "timeout: a rank polled with test longer than the launch timeout while none "
                       "of its operations completed");
  }
  return false;
}

void World::check_alive(int rank) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  throw_if_failed(rank, lock);
}

}  // namespace dtw::threads
