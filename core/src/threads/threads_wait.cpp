// Blocking and completion in the threads backend: a rank waits for its
// operations (spinning briefly, then sleeping), and the deadlock detector
// (a cycle of waits on specific peers, found by following the chain of such
// waits from the rank that closes it; a count of stuck ranks, the world
// walked only when every live rank is stuck) or the launch timeout ends a
// wait that can never complete.
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
  // A cycle found by check_cycle while the world was about to stall anyway
  // reads as before; one among ranks that still run says so.
  set_failure(kDeadlocked, -1,
              wait_graph(all_live_stuck()
                             ? "deadlock: every live rank is blocked and none can make progress"
                             : "deadlock: a cycle of blocking calls has closed: each rank in it "
                               "waits for the next, so none can make progress, whatever the "
                               "other ranks do"));
  for (int r = 0; r < size_; ++r) wake(r);
}

const Op* World::blocking_op(int rank) const {
  const RankState& r = ranks_[rank];
  if (r.finished || !r.waiting) return nullptr;
  // wait_any over several operations needs any one of them: not a wait on a
  // specific peer (the world-wide check covers it).
  if (r.any && r.waiting_on.size() != 1) return nullptr;
  // A posted operation nothing has matched can be completed only by its
  // peer posting the other side (a receive names its source, a send its
  // destination), and a rank in a wait posts nothing until the wait returns.
  // A matched one will complete (its copy is queued or running).
  for (const Op* op : r.waiting_on)
    if (op->state == Op::State::kPosted) return op;
  return nullptr;
}

bool World::chain_closes(int rank, Chain& cycle) const {
  // The edges are read one by one, not at one instant: a chain seen here may
  // have broken meanwhile, so a cycle found is only a candidate that
  // check_cycle confirms under the locks. Missing one is what cannot happen:
  // every rank publishes its edge (a seq_cst store) before it follows the
  // chain (seq_cst loads), so of the ranks of a cycle, the last to publish
  // sees every other's edge, as with the stuck counts.
  cycle.size = 0;
  for (int at = rank; cycle.size < kMaxChain;) {
    const int next = ranks_[at].waits_for.load();
    if (next < 0) return false;  // a rank that runs, polls, waits for any, or has returned
    cycle.ranks[cycle.size++] = at;
    if (next == rank) return true;
    // A cycle that does not pass through `rank`: the last of its ranks to
    // block saw it whole (or it is longer than kMaxChain).
    const auto seen = cycle.ranks.begin() + cycle.size;
    if (std::find(cycle.ranks.begin(), seen, next) != seen) return false;
    at = next;
  }
  return false;  // longer than kMaxChain: left to the world-wide check
}

bool World::cycle_holds(const Chain& cycle) const {
  for (int i = 0; i < cycle.size; ++i) {
    const Op* op = blocking_op(cycle.ranks[i]);
    if (op == nullptr || op->peer_world != cycle.ranks[(i + 1) % cycle.size]) return false;
  }
  return true;
}

bool World::check_cycle(const Chain& cycle) {
  // The stripes of the cycle's ranks, each once, in increasing order (the
  // lock order): at most kMaxChain locks, however large the world.
  std::array<std::size_t, kMaxChain> stripes{};
  int n = 0;
  for (int i = 0; i < cycle.size; ++i) stripes[n++] = stripe_index(cycle.ranks[i]);
  std::sort(stripes.begin(), stripes.begin() + n);
  n = static_cast<int>(std::unique(stripes.begin(), stripes.begin() + n) - stripes.begin());
  for (int i = 0; i < n; ++i) stripes_[stripes[i]].mu.lock();
  // With these locks held, no edge of the cycle can change: completing one
  // of its operations takes the locks of both its sides, which are two ranks
  // of the cycle. So if every edge holds now, every rank of the cycle waits
  // for the next one's post, which none of them can make: a deadlock. A
  // message already posted that would satisfy a wait was matched when the
  // second side was posted, so such a wait has no edge here.
  const bool deadlocked = failure() == kRunning && cycle_holds(cycle);
  for (int i = n; i-- > 0;) stripes_[stripes[i]].mu.unlock();
  if (!deadlocked) return false;
  // Confirmed. The report shows the whole world, at one instant: every lock.
  // (Only a failure can have broken the cycle since, and then that is reported.)
  const AllLocks all(*this);
  if (failure() != kRunning || !cycle_holds(cycle)) return false;
  declare_deadlock();
  return true;
}

bool World::counts_say_all_stuck(int rank) {
  // Every change of a count is a read-modify-write, and every rank that changes
  // one reads all of them after: of two ranks that get stuck (or finish) at
  // once, the later one sees both. So the last rank to get stuck sees the
  // world stuck, whichever stripes the others are in.
  const Stripe& mine = stripe_of(rank);
  if (mine.stuck.load() != mine.live.load()) return false;
  bool any_live = false;
  for (const Stripe& s : stripes_) {
    const int live = s.live.load();
    if (s.stuck.load() != live) return false;
    any_live = any_live || live > 0;
  }
  return any_live;
}

bool World::check_deadlock(int rank) {
  // The counts first, without a lock: the whole world is locked only when
  // they say every live rank is stuck, which in a world that still moves
  // happens at most for an instant.
  if (!counts_say_all_stuck(rank)) return false;
  const AllLocks all(*this);
  if (failure() != kRunning || !all_live_stuck()) return false;
  declare_deadlock();
  return true;
}

void World::fail_timeout(int rank, const char* headline, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  {
    const AllLocks all(*this);
    if (failure() == kRunning) {
      std::string graph = wait_graph(headline);
      RankState& me = ranks_[rank];
      stop_waiting(me);
      me.polled = nullptr;
      set_failure(kAborted, rank, "TimeoutError");
      for (int r = 0; r < size_; ++r) wake(r);
      throw TimeoutError(graph);  // the locks are released as it leaves, then the wake-ups sent
    }
  }
  lock.lock();  // another rank failed first: the caller reports that
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
  if (done()) return;
  send_wakes();  // whoever this rank woke must run while it waits
  if (!fibers_) {
    me.cv.wait(lock, done);
    return;
  }
  // Whoever changes what `done` reads does so under this rank's lock and wakes
  // it (mark_done), so reading wake_seq under the lock first loses no wake-up.
  while (!done())
    sleep(rank, lock, me.wake_seq.load(std::memory_order_acquire), Clock::time_point::max());
}

void World::sleep(int rank, std::unique_lock<std::mutex>& lock, std::uint64_t seen,
                  Clock::time_point deadline) {
  RankState& me = ranks_[rank];
  send_wakes();
  if (!fibers_) {
    me.cv.wait_until(lock, deadline, [&] { return me.wake_seq.load() != seen; });
    return;
  }
  // Never park holding a lock: the fibers run next on this worker may need it.
  lock.unlock();
  fibers_->park(rank, me.wake_seq, seen, deadline);
  lock.lock();
}

void World::throw_if_failed(int rank, std::unique_lock<std::mutex>& lock) {
  const Failure failed = failure();
  if (failed == kRunning) return;
  stop_waiting(ranks_[rank]);
  quiesce(rank, lock);
  if (failed == kDeadlocked) throw DeadlockError(deadlock_report_);
  throw AbortedError("call cancelled because rank " + std::to_string(abort_rank_) +
                     " failed first (" + abort_kind_ + ")");
}

void World::throw_op_error(const Op& op) {
  if (op.error.empty()) return;
  if (op.error_is_abort) throw AbortedError(op.error);
  if (op.error_is_cuda) throw CudaError(op.error);
  throw InvalidArgument(op.error);
}

// Copies of large messages into this rank's receive buffers: done by the
// receiver, in its own wait or test, outside the locks.
void World::run_copy_jobs(int rank, std::unique_lock<std::mutex>& lock) {
  RankState& me = ranks_[rank];
  while (!me.copy_jobs.empty()) {
    const std::shared_ptr<Op> job = me.copy_jobs.front();
    const std::shared_ptr<Op> send = job->partner;
    lock.unlock();
    {
      PairLock locks(*this, rank, send->owner);
      // The sender may have returned or dropped its request while no lock was
      // held; it then took the job back and failed it.
      const auto it = std::find(me.copy_jobs.begin(), me.copy_jobs.end(), job);
      if (it != me.copy_jobs.end()) {
        me.copy_jobs.erase(it);
        ++me.copies_in_flight;
        ++ranks_[send->owner].copies_in_flight;
        locks.unlock();
        transfer(*send, *job);
        locks.lock();
        --me.copies_in_flight;
        --ranks_[send->owner].copies_in_flight;
        mark_done(*send);
        mark_done(*job);
      }
    }
    lock.lock();
  }
}

std::size_t World::complete(int rank, std::span<Op* const> ops, const char* call, bool any) {
  RankState& me = ranks_[rank];
  // Without a lock when every op is done already (as an exchange's usually
  // is) and the rank is not polling: `done` is set after everything else of
  // the op is written. The locked path below gives the same answer.
  if (!any && me.polled.load(std::memory_order_relaxed) == nullptr &&
      std::all_of(ops.begin(), ops.end(),
                  [](const Op* op) { return op->done.load(std::memory_order_acquire); })) {
    for (const Op* op : ops) throw_op_error(*op);
    return 0;
  }
  const WakeOnExit wakes(*this);
  std::unique_lock lock(lock_of(rank));
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
      stripe_of(rank).stuck.fetch_add(1);
      if (counts_say_all_stuck(rank)) {
        // Perhaps the last rank to get stuck: look at the whole world (with
        // every lock, so not holding this one), then at this rank again.
        lock.unlock();
        check_deadlock(rank);
        lock.lock();
        continue;
      }
      // A wait on specific peers: publish its edge and follow the chain of
      // such waits; if it comes back here, a cycle has just closed.
      if (const Op* op = blocking_op(rank)) {
        me.waits_for.store(op->peer_world);
        Chain cycle;
        if (chain_closes(rank, cycle)) {
          lock.unlock();  // check_cycle takes the cycle's locks in order
          check_cycle(cycle);
          lock.lock();
          continue;
        }
      }
    }
    const Clock::time_point deadline = *start + timeout_;
    if (now >= deadline) {
      fail_timeout(rank, "timeout: a rank waited longer than the launch timeout", lock);
      continue;  // another rank failed first
    }
    const std::uint64_t seq = me.wake_seq.load(std::memory_order_acquire);
    if (!oversubscribed_ && !fibers_) {
      // Spin briefly first: a wake-up through the condition variable costs
      // several microseconds, a message between two busy cores far less.
      send_wakes();
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
  const WakeOnExit wakes(*this);
  RankState& me = ranks_[rank];
  std::unique_lock lock(lock_of(rank));
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
    fail_timeout(rank,
                 "timeout: a rank polled with test longer than the launch timeout while none "
                 "of its operations completed",
                 lock);
    throw_if_failed(rank, lock);  // another rank failed first
  }
  return false;
}

void World::check_alive(int rank) {
  const WakeOnExit wakes(*this);
  std::unique_lock lock(lock_of(rank));
  throw_if_failed(rank, lock);
}

}  // namespace dtw::threads
