// Matching, blocking and failure handling of the threads backend.
#include "threads/threads_world.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "threads/describe.h"

namespace dtw::threads {
namespace {
// A message this small is copied by whichever thread matches it, at once; a
// larger one is copied by its receiver, so that in an exchange each rank copies
// its own incoming data and the two copies run in parallel.
constexpr std::int64_t kEagerBytes = 64 * 1024;
// How long a waiting rank spins before it sleeps on its condition variable.
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

World::World(int size, std::chrono::milliseconds timeout)
    : size_(size),
      timeout_(timeout),
      oversubscribed_(size > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      ranks_(static_cast<std::size_t>(size)),
      live_(size) {}

// Called with mu_ held: the rank's predicate changes now, its thread is
// notified by notify_pending once mu_ is released.
void World::wake(int rank) {
  ranks_[rank].wake_seq.fetch_add(1, std::memory_order_release);
  if (std::find(to_wake_.begin(), to_wake_.end(), rank) == to_wake_.end()) to_wake_.push_back(rank);
}

void World::unstick(RankState& r) {
  if (!r.stuck) return;
  r.stuck = false;
  --stuck_;
}

void World::stop_waiting(RankState& r) {
  r.waiting = false;
  unstick(r);
}

void World::notify_pending(std::unique_lock<std::mutex>& lock, bool relock) {
  // Swapping with a per-thread list keeps both capacities: no allocation per call.
  thread_local std::vector<int> ranks;
  ranks.clear();
  ranks.swap(to_wake_);
  lock.unlock();
  for (int r : ranks) ranks_[r].cv.notify_one();  // the rank's own thread is the only waiter
  if (relock) lock.lock();
}

// Sends the wake-ups a public call collected when it returns or throws.
class World::NotifyOnExit {
 public:
  NotifyOnExit(World& world, std::unique_lock<std::mutex>& lock) : world_(world), lock_(lock) {}
  ~NotifyOnExit() {
    if (!lock_.owns_lock()) lock_.lock();
    world_.notify_pending(lock_, false);
  }
  NotifyOnExit(const NotifyOnExit&) = delete;
  NotifyOnExit& operator=(const NotifyOnExit&) = delete;

 private:
  World& world_;
  std::unique_lock<std::mutex>& lock_;
};

void World::mark_done(Op& op) {
  op.state = Op::State::kDone;
  op.done.store(true, std::memory_order_release);
  ranks_[op.owner].polled = nullptr;  // its poll (if any) is fresh again
  // Conservative: any completion may be one the owner waits for; if not, the
  // owner wakes, finds nothing, and counts itself stuck again.
  unstick(ranks_[op.owner]);
  auto& owned = ranks_[op.owner].owned;
  owned.erase(std::remove_if(owned.begin(), owned.end(),
                             [&](const std::shared_ptr<Op>& o) { return o.get() == &op; }),
              owned.end());
  wake(op.owner);
  // Once both sides are done, drop their links to each other: each holds the
  // other, so the pair would otherwise keep itself alive forever.
  if (op.partner && op.partner->state == Op::State::kDone) {
    const std::shared_ptr<Op> other = std::move(op.partner);
    other->partner.reset();
  }
}

void World::unqueue(const Op& op) {
  const int receiver = op.send ? op.peer_world : op.owner;
  const Key key{op.context, op.send ? op.owner : op.peer_world, op.msg_tag};
  auto& queues = op.send ? ranks_[receiver].unexpected : ranks_[receiver].posted;
  auto it = queues.find(key);
  if (it == queues.end()) return;
  std::erase_if(it->second, [&](const std::shared_ptr<Op>& o) { return o.get() == &op; });
  // post() reads front() of any queue it finds, so no empty queue may stay behind.
  if (it->second.empty()) queues.erase(it);
}

void World::transfer(Op& send, Op& recv) {
  if (send.count > 0) {
    if (recv.reduce) {
      kernels::reduce_into(Buffer{recv.dst, send.count, send.type},
                           ConstBuffer{send.src, send.count, send.type}, recv.reduce_op);
    } else {
      std::memcpy(recv.dst, send.src, static_cast<std::size_t>(send.count) * size_of(send.type));
    }
  }
  recv.received_count = send.count;
}

void World::match(const std::shared_ptr<Op>& send, const std::shared_ptr<Op>& recv, int by_rank,
                  std::unique_lock<std::mutex>& lock) {
  std::string error;
  if (send->type != recv->type) {
    error = mismatch_message(*send, *recv, "type mismatch");
  } else if (send->count > recv->count) {
    error = mismatch_message(*send, *recv, "message larger than the receive buffer");
  } else if (recv->reduce && send->count != recv->count) {
    error = mismatch_message(*send, *recv, "recv_reduce needs a message of exactly its size");
  }
  if (!error.empty()) {
    send->error = recv->error = error;
    mark_done(*send);
    mark_done(*recv);
    return;
  }
  send->partner = recv;
  recv->partner = send;
  send->state = recv->state = Op::State::kMatched;
  const std::int64_t bytes = send->count * static_cast<std::int64_t>(size_of(send->type));
  if (by_rank != recv->owner && bytes > kEagerBytes) {
    ranks_[recv->owner].copy_jobs.push_back(recv);
    unstick(ranks_[recv->owner]);
    wake(recv->owner);
    return;
  }
  ++ranks_[send->owner].copies_in_flight;
  ++ranks_[recv->owner].copies_in_flight;
  lock.unlock();
  transfer(*send, *recv);
  lock.lock();
  --ranks_[send->owner].copies_in_flight;
  --ranks_[recv->owner].copies_in_flight;
  mark_done(*send);
  mark_done(*recv);
}

void World::post(const std::shared_ptr<Op>& op) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  throw_if_failed(op->owner, lock);
  ranks_[op->owner].polled = nullptr;  // a rank that posts is not stuck polling
  ranks_[op->owner].owned.push_back(op);
  // Receiver-side queues, keyed by (context, source, tag): FIFO per key is what
  // makes messages of one (source, tag) arrive in the order they were sent.
  const int receiver = op->send ? op->peer_world : op->owner;
  const Key key{op->context, op->send ? op->owner : op->peer_world, op->msg_tag};
  RankState& r = ranks_[receiver];
  auto& other = op->send ? r.posted : r.unexpected;
  auto& mine = op->send ? r.unexpected : r.posted;
  auto it = other.find(key);
  if (it == other.end()) {
    mine[key].push_back(op);
    return;
  }
  std::shared_ptr<Op> peer = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) other.erase(it);
  if (op->send) match(op, peer, op->owner, lock);
  else match(peer, op, op->owner, lock);
}

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
  notify_pending(lock, true);
  me.cv.wait(lock, [&] { return me.copies_in_flight == 0; });
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
  const Clock::time_point start = Clock::now();
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
    me.waiting = true;
    me.any = any;
    me.call = call;
    me.since = start;
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
    const Clock::time_point deadline = start + timeout_;
    if (Clock::now() >= deadline)
      fail_timeout(rank, "timeout: a rank waited longer than the launch timeout");
    const std::uint64_t seq = me.wake_seq.load(std::memory_order_acquire);
    // Whoever this rank woke must run while it waits.
    if (!to_wake_.empty()) notify_pending(lock, true);
    if (!oversubscribed_) {
      // Spin briefly first: a wake-up through the condition variable costs
      // several microseconds, a message between two busy cores far less.
      lock.unlock();
      const Clock::time_point spin_end = Clock::now() + kSpin;
      while (me.wake_seq.load(std::memory_order_acquire) == seq && Clock::now() < spin_end)
        _mm_pause();
      lock.lock();
    }
    me.cv.wait_until(lock, deadline, [&] { return me.wake_seq.load() != seq; });
  }
}

bool World::test(int rank, Op& op, const char* call, bool polling) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  RankState& me = ranks_[rank];
  run_copy_jobs(rank, lock);
  if (op.state == Op::State::kDone) {
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

std::string World::finish_rank(int rank) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  RankState& me = ranks_[rank];
  stop_waiting(me);
  std::string pending;
  // Anything this rank left unfinished can no longer complete: take it out of
  // the queues, and fail a partner that was already matched with it.
  for (auto& op : std::vector<std::shared_ptr<Op>>(me.owned)) {
    if (op->state == Op::State::kDone) continue;
    pending += "\n  " + describe(*op);
    if (op->state == Op::State::kPosted) {
      unqueue(*op);
      mark_done(*op);
    }
  }
  pending += me.abandoned;
  quiesce(rank, lock);
  for (auto& op : std::vector<std::shared_ptr<Op>>(me.owned)) {
    if (op->partner && op->partner->state != Op::State::kDone) {
      // Matched, but the receiver has not copied yet: cancel that copy.
      op->partner->error = "rank " + std::to_string(rank) + " returned before its " +
                           std::string(op->call) + " completed";
      op->partner->error_is_abort = aborted_ || deadlocked_;
      std::erase(me.copy_jobs, op);
      std::erase(ranks_[op->partner->owner].copy_jobs, op->partner);
      mark_done(*op->partner);
    }
    mark_done(*op);
  }
  me.finished = true;
  --live_;
  // The ranks still running may have been waiting for this one. Those whose
  // operations it completed or cancelled were woken by mark_done; the rest
  // wait on, for a peer that may still come, until every live rank is stuck.
  if (!deadlocked_ && !aborted_ && live_ > 0 && stuck_ == live_ && all_live_stuck())
    declare_deadlock();
  return pending;
}

void Op::abandon() noexcept {
  if (auto w = world.lock()) w->abandon(*this);
}

void World::abandon(Op& op) noexcept {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  if (op.state == Op::State::kDone) return;
  // Dropped by unwinding, or after the launch failed: the failure is reported
  // already, and the dropped request is only a consequence of it.
  const bool consequence = std::uncaught_exceptions() > 0 || aborted_ || deadlocked_;
  if (!consequence) ranks_[op.owner].abandoned += "\n  " + describe(op) + " (Request destroyed before wait)";
  if (op.state == Op::State::kPosted) {
    unqueue(op);
    mark_done(op);
    return;
  }
  // Matched. If the receiver has not taken the copy job yet, cancel it and fail
  // the partner; otherwise a copy is running right now: wait until it is over.
  Op& recv = op.send ? *op.partner : op;
  auto& jobs = ranks_[recv.owner].copy_jobs;
  const auto job = std::find_if(jobs.begin(), jobs.end(),
                                [&](const std::shared_ptr<Op>& j) { return j.get() == &recv; });
  if (job != jobs.end()) {
    jobs.erase(job);
    Op& partner = *op.partner;
    partner.error = "rank " + std::to_string(op.owner) + " dropped its pending " + op.call +
                    (op.send ? " to" : " from") + " rank " + std::to_string(op.peer_world) +
                    " (" + describe_tag(op) + ") without waiting for it";
    partner.error_is_abort = consequence;
    mark_done(partner);
    mark_done(op);
    return;
  }
  notify_pending(lock, true);
  ranks_[op.owner].cv.wait(lock, [&] { return op.state == Op::State::kDone; });
}

void World::abort(int rank, const std::string& kind) {
  std::unique_lock lock(mu_);
  const NotifyOnExit notify(*this, lock);
  if (!aborted_) {
    aborted_ = true;
    abort_rank_ = rank;
    abort_kind_ = kind;
  }
  for (int r = 0; r < size_; ++r) wake(r);
}

int World::subgroup_context(int parent_context, std::uint64_t split_id, int color) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = contexts_.try_emplace({parent_context, split_id, color}, next_context_);
  if (inserted) ++next_context_;
  return it->second;
}

}  // namespace dtw::threads
