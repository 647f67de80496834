#pragma once
// The shared state of a threads-backend world: message queues, matching,
// blocking with deadlock detection, and abort.
//
// Each rank's state is guarded by a lock of its own stripe: the ranks are
// cut into at most 32 contiguous blocks, each with one mutex. A send or
// receive between ranks a and b takes the locks of a's and b's stripes (the
// lower first), so exchanges in different stripes never wait for each other:
// at a thousand ranks on a few cores, one world-wide lock was the most
// contended thing in a run, and contiguous blocks match the fiber workers'
// (fibers.h), so a worker's exchanges rarely meet another's. The locks are
// held only to match and to flip states, never while a large message is
// copied. The deadlock detector keeps a count of stuck ranks; only when the
// count says every live rank is stuck does it take every stripe's lock and
// look at the whole world at one instant, which keeps it exact. Its cycle
// check (waits on specific peers) follows published edges without locks and
// locks only the stripes of a candidate cycle, at most kMaxChain of them, to
// confirm it. Nothing else done under a lock grows with the world. (Why stripes and not a lock per
// rank: taking a thousand locks at once for that look is slow, and more than
// ThreadSanitizer can follow.)
//
// Lock order: stripe locks in increasing stripe; fail_mu_ and contexts_mu_
// are leaves (nothing is taken while they are held), as are the fiber pool's.
// A rank never parks its fiber or sleeps holding any lock but its own
// stripe's (and a fiber not even that one).
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "dtw/comm.h"
#include "threads/op_queue.h"

namespace dtw::threads {

class FiberPool;
class DeviceRanks;

using Clock = std::chrono::steady_clock;

class World;

// What a receive matches a send by: communicator, source rank, tag.
struct Key {
  int context = 0, source = 0, tag = 0;
  auto operator<=>(const Key&) const = default;
  // Ranks and tags are small integers: multiplying spreads them well enough.
  std::size_t hash() const {
    return (static_cast<std::size_t>(source) * 0x9E3779B1u) ^
           (static_cast<std::size_t>(tag) * 0x85EBCA77u) ^ static_cast<std::size_t>(context);
  }
};

// One posted send or receive.
struct Op : detail::RequestState, std::enable_shared_from_this<Op> {
  // Withdraws the operation when its Request is dropped while pending.
  void abandon() noexcept override;
  std::weak_ptr<World> world;

  int owner = 0;       // world rank that posted it
  int peer_world = 0;  // world rank of the other side
  int group_peer = 0;  // the other side's rank in the posting communicator (for messages)
  int group_owner = 0;  // the owner's rank in the posting communicator (for reports)
  int context = 0;
  int msg_tag = 0;
  bool channel = false;  // posted on a collective channel: msg_tag numbers an operation
  bool send = false;
  const void* src = nullptr;  // sends
  void* dst = nullptr;        // receives
  std::int64_t count = 0;
  DataType type = DataType::kByte;
  bool reduce = false;  // a recv_reduce: combine into dst instead of copying
  ReduceOp reduce_op = ReduceOp::kSum;
  const char* call = "";  // the public call, for reports
  // Device worlds only (device_ranks.h): the owner's device and stream, and
  // for a send the event after the work its owner queued before it.
  int device = -1;
  void* stream = nullptr;
  std::shared_ptr<void> ready;

  // Guarded by the owner's lock (World::lock_of); a change of `partner` or
  // of a matched pair's states holds both owners' locks.
  enum class State { kPosted, kMatched, kDone } state = State::kPosted;
  std::shared_ptr<Op> partner;
  std::string error;  // set on both sides of a bad match
  bool error_is_abort = false;  // the error is a consequence of another rank's failure
  bool error_is_cuda = false;   // the device copy failed (a CudaError, not bad input)
  std::atomic<bool> done{false};
  // While unmatched: its place in the receiver's OpQueue.
  Key queued_key;
  Op* next_queued = nullptr;
};

// Rank states looked at by world-wide operations (the deadlock check and the
// wait-for report, which lock every rank; an abort, which wakes every rank),
// summed over every world of this process. A regression test reads it: a
// world that runs without deadlock must cost O(p) of these in all, never
// O(p) per blocking call.
std::int64_t world_wide_rank_visits();


class World {
 public:
  World(int size, std::chrono::milliseconds timeout);

  int size() const { return size_; }
  // Fiber mode (fibers.h): rank r is fiber r of `pool`, and a rank that waits
  // parks its fiber instead of sleeping on its condition variable. Set before
  // any rank runs.
  void use_fibers(FiberPool* pool) { fibers_ = pool; }
  // Device buffers (LaunchOptions::device "cuda"): every message that carries
  // data is copied by its receiver through `devices` (device_ranks.h). Set
  // before any rank runs.
  void use_devices(std::shared_ptr<DeviceRanks> devices) { devices_ = std::move(devices); }

  // Posts a send or receive; may match (and for small messages copy) at once.
  void post(const std::shared_ptr<Op>& op);
  // Blocks rank `rank` until all `ops` are done (`any`: until one is, and
  // returns its index); throws AbortedError, DeadlockError, TimeoutError, or
  // InvalidArgument for a bad match of an op it returns for.
  std::size_t complete(int rank, std::span<Op* const> ops, const char* call, bool any = false);
  // Without blocking: does the copies queued for `rank`, then says whether
  // `op` is done (throwing its error if it failed). `polling`: the caller is
  // polling (Comm::test), so polling for longer than the timeout with nothing
  // of this rank completing is a TimeoutError.
  bool test(int rank, Op& op, const char* call, bool polling);
  // Throws AbortedError or DeadlockError when the launch is failing.
  void check_alive(int rank);
  // A rank returned or threw: cancel what it left behind, re-run the detector.
  // Returns a description of requests it left pending ("" if none).
  std::string finish_rank(int rank);
  // The Request of `op` was destroyed while pending: withdraw it (see Request).
  void abandon(Op& op) noexcept;
  // A rank failed: every pending and future call of the others throws AbortedError.
  void abort(int rank, const std::string& kind);
  // The context id every member of one split agrees on.
  int subgroup_context(int parent_context, std::uint64_t split_id, int color);

 private:
  // Everything of one rank, guarded by lock_of(rank) (the wait-for report and
  // the deadlock check read every rank's with every lock held).
  struct RankState {
    std::condition_variable cv;  // threads mode: the rank's thread sleeps here, on its lock
    std::atomic<std::uint64_t> wake_seq{0};
    OpQueue<Op, Key> unexpected;  // sends to me, unmatched
    OpQueue<Op, Key> posted;      // my receives, unmatched
    std::vector<std::shared_ptr<Op>> copy_jobs;                 // matched receives I copy
    std::vector<std::shared_ptr<Op>> owned;                     // my ops not yet done
    std::string abandoned;  // descriptions of requests dropped while pending
    int copies_in_flight = 0;                                   // copies touching my buffers
    // The wait this rank is in (valid while waiting).
    bool waiting = false;
    // Waiting and unable to progress: counted in its stripe's `stuck`, so that the
    // deadlock check costs O(1) per blocking call, not a scan of the world.
    bool stuck = false;
    // While stuck on a wait that names its peers (not a wait_any over
    // several operations): the peer of its first operation that nothing has
    // matched, which only that peer can complete by posting. -1 otherwise.
    // These edges of the wait-for graph are what the cycle check follows
    // without locks (check_cycle). Written under the rank's lock, with
    // `stuck`; read by any rank without it.
    std::atomic<int> waits_for{-1};
    bool finished = false;
    bool any = false;  // waits for any one of waiting_on (wait_any), not all
    const char* call = "";
    std::vector<Op*> waiting_on;
    Clock::time_point since;
    // A rank polling with test() is running, not waiting: the detector never
    // counts it as stuck, but a poll that fails for longer than the timeout,
    // with nothing of this rank completing meanwhile, is a TimeoutError.
    // Cleared whenever one of its ops completes or it blocks. Atomic because
    // complete()'s fast path reads it without the lock (only the rank itself
    // sets it; others only clear it).
    std::atomic<const Op*> polled{nullptr};
    Clock::time_point polling_since;
  };

  // One mutex per stripe, on a cache line of its own with the stripe's counts
  // for the deadlock check (changed under `mu`; read by any rank without it).
  // Counts per stripe, not per world: a world-wide count would be one cache
  // line that every blocking call of every worker writes.
  struct alignas(64) Stripe {
    std::mutex mu;
    std::atomic<int> live{0};   // its ranks not finished
    std::atomic<int> stuck{0};  // its live ranks waiting with nothing that can progress
  };
  static constexpr int kMaxStripes = 32;
  std::size_t stripe_index(int rank) const {
    return static_cast<std::size_t>(static_cast<std::int64_t>(rank) *
                                    static_cast<std::int64_t>(stripes_.size()) / size_);
  }
  Stripe& stripe_of(int rank) { return stripes_[stripe_index(rank)]; }
  std::mutex& lock_of(int rank) { return stripe_of(rank).mu; }
  int rank_of(const RankState& r) const { return static_cast<int>(&r - ranks_.data()); }
  // The counts say every live rank is stuck (read without locks: a hint that
  // the exact check under every lock confirms). `rank`'s stripe is read first.
  bool counts_say_all_stuck(int rank);

  // The locks of two ranks (one when they share a stripe), lower stripe first.
  class PairLock {
   public:
    PairLock(World& world, int a, int b);
    ~PairLock() { unlock(); }
    PairLock(const PairLock&) = delete;
    PairLock& operator=(const PairLock&) = delete;
    void lock();
    void unlock();

   private:
    std::mutex* first_;
    std::mutex* second_;  // nullptr when both ranks are one
    bool held_ = false;
  };
  // Every stripe's lock, in order: the world stands still while it is held.
  class AllLocks {
   public:
    explicit AllLocks(World& world);
    ~AllLocks();
    AllLocks(const AllLocks&) = delete;
    AllLocks& operator=(const AllLocks&) = delete;

   private:
    World& world_;
  };
  // Wake-ups are collected while locks are held and sent once they are
  // released: a rank notified while the waker still holds its lock wakes only
  // to block on that lock again. Each public call sends its wake-ups when it
  // returns or throws (the list is per OS thread; a fiber sends its own before
  // it parks, so fibers sharing a worker never see each other's).
  class WakeOnExit {
   public:
    explicit WakeOnExit(World& world) : world_(world) {}
    ~WakeOnExit() { world_.send_wakes(); }
    WakeOnExit(const WakeOnExit&) = delete;
    WakeOnExit& operator=(const WakeOnExit&) = delete;

   private:
    World& world_;
  };
  void send_wakes();

  bool test_locked(int rank, Op& op, const char* call, bool polling);  // test() but the yield
  void run_copy_jobs(int rank, std::unique_lock<std::mutex>& lock);
  static void throw_op_error(const Op& op);
  // Both owners' locks are held (`locks`); released around a copy.
  void match(const std::shared_ptr<Op>& send, const std::shared_ptr<Op>& recv, int by_rank,
             PairLock& locks);
  void transfer(Op& send, Op& recv);  // the copy (or reduction), outside the locks
  void mark_done(Op& op);             // the locks of op's owner and of its partner's are held
  void unqueue(const Op& op);  // takes a posted, unmatched op out of its queue (both locks held)
  void wake(int rank);         // rank's lock is held
  bool can_progress(int rank) const;
  void stop_waiting(RankState& r);  // leaves the wait (and the stuck count)
  void unstick(RankState& r);       // something this rank waits for changed
  bool all_live_stuck() const;      // the full check, every lock held
  // The cycle check, for waits on specific peers: a cycle of ranks each
  // blocked on an operation only the next can complete is a deadlock the
  // moment it closes, whatever the other ranks do. The chain of published
  // edges (waits_for) is followed for at most kMaxChain hops from the rank
  // that just got stuck; a longer cycle is left to the world-wide check.
  static constexpr int kMaxChain = 16;
  struct Chain {  // ranks in the order they wait for each other; no allocation
    std::array<int, kMaxChain> ranks{};
    int size = 0;
  };
  // The operation `rank`'s wait needs from one specific peer, nothing having
  // matched it (its first such one), or nullptr; `rank`'s lock is held.
  const Op* blocking_op(int rank) const;
  // Follows the edges from `rank` (no lock); true, with the ranks in `cycle`,
  // when they lead back to it.
  bool chain_closes(int rank, Chain& cycle) const;
  // Every edge of `cycle` holds (the locks of its ranks' stripes are held).
  bool cycle_holds(const Chain& cycle) const;
  // Confirms `cycle` under the locks of its ranks' stripes only, then
  // declares the deadlock with every lock. Called holding no lock. True if declared.
  bool check_cycle(const Chain& cycle);
  // When the counts say every live rank is stuck, takes every lock and looks;
  // declares the deadlock if so. Called holding no lock. True if declared.
  bool check_deadlock(int rank);
  void declare_deadlock();  // every lock held; the whole world stuck, or a cycle confirmed
  // A rank timed out: the first one writes the report and fails the launch,
  // so every other rank is cancelled with AbortedError naming it. Called with
  // `lock` (the rank's own) held; returns (with it held again) only when
  // another failure came first, which the caller then reports.
  void fail_timeout(int rank, const char* headline, std::unique_lock<std::mutex>& lock);
  void quiesce(int rank, std::unique_lock<std::mutex>& lock);
  // Blocks `rank` until `done()` holds (checked under the rank's lock): its
  // thread on its condition variable, or its fiber parked with the lock released.
  void await(int rank, std::unique_lock<std::mutex>& lock, const std::function<bool()>& done);
  // Sleeps `rank` until its wake_seq moves past `seen` or `deadline` passes
  // (or spuriously); its lock is released meanwhile and held again on return.
  void sleep(int rank, std::unique_lock<std::mutex>& lock, std::uint64_t seen,
             Clock::time_point deadline);
  std::string wait_graph(const char* headline) const;  // in wait_graph.cpp; every lock held
  void throw_if_failed(int rank, std::unique_lock<std::mutex>& lock);
  // The launch's first failure wins; later ones are consequences of it.
  enum Failure : int { kRunning = 0, kAborted = 1, kDeadlocked = 2 };
  bool set_failure(Failure failure, int rank, std::string text);
  Failure failure() const { return static_cast<Failure>(failure_.load(std::memory_order_acquire)); }

  const int size_;
  const std::chrono::milliseconds timeout_;
  const bool oversubscribed_;
  FiberPool* fibers_ = nullptr;
  std::shared_ptr<DeviceRanks> devices_;
  std::vector<RankState> ranks_;
  std::vector<Stripe> stripes_;
  // The failure, published by failure_ (release) once its text is written;
  // never changed after.
  std::mutex fail_mu_;
  std::atomic<int> failure_{kRunning};
  int abort_rank_ = -1;
  std::string abort_kind_;       // kAborted: the failed rank's error kind
  std::string deadlock_report_;  // kDeadlocked: the wait-for report
  std::mutex contexts_mu_;
  std::map<std::tuple<int, std::uint64_t, int>, int> contexts_;
  int next_context_ = 1;
};

}  // namespace dtw::threads
