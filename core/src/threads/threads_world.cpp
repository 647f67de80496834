// Matching and delivery of the threads backend, and a rank's end and abort
// (threads_wait.cpp: blocking, completion and the deadlock detector).
#include "threads/threads_world.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "threads/describe.h"
#include "threads/device_ranks.h"
#include "threads/fibers.h"

namespace dtw::threads {
namespace {
// A message this small is copied by whichever thread matches it, at once; a
// larger one is copied by its receiver, in its next wait or test, so that in an
// exchange each rank copies its own incoming data and the two copies run in
// parallel. Also when the receiver matches it itself, posting the receive: a
// copy made inside post() would hold back whatever the rank posts next. In a
// sendrecv (receive posted first) the rank that arrives second would copy its
// whole message before posting its send, while the first waited for that send
// to start its own copy: the two copies of a 2-rank allgather ran one after
// the other (docs/results/ring_profile.md).
constexpr std::int64_t kEagerBytes = 64 * 1024;
// A message this small is copied with both ranks' locks held: releasing and
// taking them again would cost more than the copy.
constexpr std::int64_t kCopyUnderLockBytes = 4 * 1024;
}  // namespace

World::World(int size, std::chrono::milliseconds timeout)
    : size_(size),
      timeout_(timeout),
      oversubscribed_(size > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      ranks_(static_cast<std::size_t>(size)),
      stripes_(static_cast<std::size_t>(std::min(size, kMaxStripes))) {
  for (int r = 0; r < size; ++r) stripe_of(r).live.fetch_add(1);
}

World::PairLock::PairLock(World& world, int a, int b)
    : first_(&world.lock_of(std::min(a, b))), second_(&world.lock_of(std::max(a, b))) {
  // Stripes are contiguous blocks, so the lower rank's stripe is the lower one.
  if (second_ == first_) second_ = nullptr;
  lock();
}

void World::PairLock::lock() {
  first_->lock();
  if (second_) second_->lock();
  held_ = true;
}

void World::PairLock::unlock() {
  if (!held_) return;
  held_ = false;
  if (second_) second_->unlock();
  first_->unlock();
}

namespace {
std::atomic<std::int64_t> g_world_wide_visits{0};
}  // namespace

std::int64_t world_wide_rank_visits() { return g_world_wide_visits.load(); }

World::AllLocks::AllLocks(World& world) : world_(world) {
  g_world_wide_visits.fetch_add(world_.size_, std::memory_order_relaxed);
  for (Stripe& s : world_.stripes_) s.mu.lock();
}

World::AllLocks::~AllLocks() {
  for (auto s = world_.stripes_.rbegin(); s != world_.stripes_.rend(); ++s) s->mu.unlock();
}

namespace {
// The ranks this OS thread's current call has woken (World::WakeOnExit).
thread_local std::vector<int> t_to_wake;
}  // namespace

// Called with the rank's lock held: its predicate changes now, its thread or
// fiber is notified by send_wakes once the locks are released.
void World::wake(int rank) {
  ranks_[rank].wake_seq.fetch_add(1, std::memory_order_release);
  t_to_wake.push_back(rank);
}

void World::send_wakes() {
  if (t_to_wake.empty()) return;
  // Swapping with a second per-thread list keeps both capacities: no
  // allocation per call, and a wake() while notifying lands in the fresh list.
  thread_local std::vector<int> ranks;
  ranks.clear();
  ranks.swap(t_to_wake);
  if (ranks.size() > 8) {  // an abort wakes everyone: once each is enough
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  }
  if (fibers_) {
    for (int r : ranks) fibers_->wake(r);  // takes its worker's lock, a leaf
  } else {
    // The rank's own thread is the only waiter; its predicate changed under
    // its lock, so notifying after the lock is released loses nothing.
    for (int r : ranks) ranks_[r].cv.notify_one();
  }
}

void World::unstick(RankState& r) {
  if (!r.stuck) return;
  r.stuck = false;
  r.waits_for.store(-1);  // in the critical section that changes what it waits for
  stripe_of(rank_of(r)).stuck.fetch_sub(1);
}

void World::stop_waiting(RankState& r) {
  r.waiting = false;
  unstick(r);
}

bool World::set_failure(Failure kind, int rank, std::string text) {
  std::lock_guard lock(fail_mu_);
  if (failure_.load(std::memory_order_relaxed) != kRunning) return false;
  abort_rank_ = rank;
  (kind == kDeadlocked ? deadlock_report_ : abort_kind_) = std::move(text);
  failure_.store(kind, std::memory_order_release);
  return true;
}

void World::mark_done(Op& op) {
  op.state = Op::State::kDone;
  op.done.store(true, std::memory_order_release);
  RankState& owner = ranks_[op.owner];
  owner.polled = nullptr;  // its poll (if any) is fresh again
  // Conservative: any completion may be one the owner waits for; if not, the
  // owner wakes, finds nothing, and counts itself stuck again.
  unstick(owner);
  auto& owned = owner.owned;
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
  (op.send ? ranks_[receiver].unexpected : ranks_[receiver].posted).remove(&op);
}

void World::transfer(Op& send, Op& recv) {
  if (devices_ && send.count > 0) {
    // On the receiver's thread (match() made it a copy job); an error fails both sides.
    std::string error = devices_->transfer(send, recv);
    if (!error.empty()) {
      send.error = recv.error = std::move(error);
      send.error_is_cuda = recv.error_is_cuda = true;
      return;
    }
  } else if (send.count > 0) {
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
                  PairLock& locks) {
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
  // A device world's copies run on the receiver's thread, on its stream and
  // current device (device_ranks.h), whatever their size.
  if (bytes > kEagerBytes || (devices_ && bytes > 0)) {
    ranks_[recv->owner].copy_jobs.push_back(recv);
    if (by_rank != recv->owner) {  // the receiver is posting: it runs the job in its wait
      unstick(ranks_[recv->owner]);
      wake(recv->owner);
    }
    return;
  }
  if (bytes <= kCopyUnderLockBytes) {
    transfer(*send, *recv);
  } else {
    ++ranks_[send->owner].copies_in_flight;
    ++ranks_[recv->owner].copies_in_flight;
    locks.unlock();
    transfer(*send, *recv);
    locks.lock();
    --ranks_[send->owner].copies_in_flight;
    --ranks_[recv->owner].copies_in_flight;
  }
  mark_done(*send);
  mark_done(*recv);
}

void World::post(const std::shared_ptr<Op>& op) {
  const WakeOnExit wakes(*this);
  if (failure() != kRunning) {
    std::unique_lock mine(lock_of(op->owner));
    throw_if_failed(op->owner, mine);
  }
  PairLock locks(*this, op->owner, op->peer_world);
  ranks_[op->owner].polled = nullptr;  // a rank that posts is not stuck polling
  ranks_[op->owner].owned.push_back(op);
  // Receiver-side queues, keyed by (context, source, tag): FIFO per key is what
  // makes messages of one (source, tag) arrive in the order they were sent.
  const int receiver = op->send ? op->peer_world : op->owner;
  const Key key{op->context, op->send ? op->owner : op->peer_world, op->msg_tag};
  RankState& r = ranks_[receiver];
  auto& other = op->send ? r.posted : r.unexpected;
  auto& mine = op->send ? r.unexpected : r.posted;
  Op* found = other.pop(key);
  if (found == nullptr) {
    mine.push(op.get(), key);
    return;
  }
  // The queued op is alive: its owner's `owned` holds it until it is done.
  std::shared_ptr<Op> peer = found->shared_from_this();
  if (op->send) match(op, peer, op->owner, locks);
  else match(peer, op, op->owner, locks);
}

std::string World::finish_rank(int rank) {
  const WakeOnExit wakes(*this);
  RankState& me = ranks_[rank];
  std::unique_lock mine(lock_of(rank));
  stop_waiting(me);
  std::vector<std::shared_ptr<Op>> left = me.owned;
  mine.unlock();
  std::string pending;
  // Anything this rank left unfinished can no longer complete: take it out of
  // the queues, and say what it was.
  for (auto& op : left) {
    const PairLock locks(*this, rank, op->peer_world);
    if (op->state == Op::State::kDone) continue;
    pending += "\n  " + describe(*op);
    if (op->state == Op::State::kPosted) {
      unqueue(*op);
      mark_done(*op);
    }
  }
  mine.lock();
  pending += me.abandoned;
  // What is left is matched: fail a partner that has not copied yet. A copy
  // that is running touches this rank's buffers, so it is waited out first
  // (and again if another starts before this rank's pair lock is taken).
  for (bool copying = true; copying;) {
    quiesce(rank, mine);
    left = me.owned;
    mine.unlock();
    copying = false;
    for (auto& op : left) {
      PairLock locks(*this, rank, op->peer_world);
      if (me.copies_in_flight > 0) {
        copying = true;
        break;
      }
      if (op->state == Op::State::kDone) continue;
      if (op->partner && op->partner->state != Op::State::kDone) {
        op->partner->error = "rank " + std::to_string(rank) + " returned before its " +
                             std::string(op->call) + " completed";
        op->partner->error_is_abort = failure() != kRunning;
        std::erase(me.copy_jobs, op);
        std::erase(ranks_[op->partner->owner].copy_jobs, op->partner);
        mark_done(*op->partner);
      }
      mark_done(*op);
    }
    mine.lock();
  }
  me.finished = true;
  stripe_of(rank).live.fetch_sub(1);
  mine.unlock();
  // The ranks still running may have been waiting for this one. Those whose
  // operations it completed or cancelled were woken by mark_done; the rest
  // wait on, for a peer that may still come, until every live rank is stuck.
  if (failure() == kRunning) check_deadlock(rank);
  return pending;
}

void Op::abandon() noexcept {
  if (auto w = world.lock()) w->abandon(*this);
}

void World::abandon(Op& op) noexcept {
  const WakeOnExit wakes(*this);
  PairLock locks(*this, op.owner, op.peer_world);
  if (op.state == Op::State::kDone) return;
  // Dropped by unwinding, or after the launch failed: the failure is reported
  // already, and the dropped request is only a consequence of it.
  const bool consequence = std::uncaught_exceptions() > 0 || failure() != kRunning;
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
  locks.unlock();
  std::unique_lock mine(lock_of(op.owner));
  await(op.owner, mine, [&] { return op.state == Op::State::kDone; });
}

void World::abort(int rank, const std::string& kind) {
  const WakeOnExit wakes(*this);
  // Only the launch's first failure wakes everyone: a rank checks for a
  // failure under its lock before it sleeps, so once every rank has been woken
  // after the first, none can sleep through it. (Every rank that then fails as
  // a consequence comes here too: waking the world again each time would cost
  // p² at the end of every failed launch.)
  if (!set_failure(kAborted, rank, kind)) return;
  // Under the locks: a rank about to sleep reads wake_seq under its own.
  const AllLocks all(*this);
  for (int r = 0; r < size_; ++r) wake(r);
}

int World::subgroup_context(int parent_context, std::uint64_t split_id, int color) {
  const std::lock_guard lock(contexts_mu_);
  auto [it, inserted] = contexts_.try_emplace({parent_context, split_id, color}, next_context_);
  if (inserted) ++next_context_;
  return it->second;
}

}  // namespace dtw::threads
