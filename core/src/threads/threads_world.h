#pragma once
// The shared state of a threads-backend world: message queues, matching,
// blocking with deadlock detection, and abort.
//
// One mutex guards all matching state. That keeps the deadlock detector exact
// (it sees every rank's wait at one instant) and costs little: the lock is held
// only to match and to flip states, never while bytes are copied. Nothing done
// under it grows with the world: the detector keeps a count of stuck ranks and
// looks at the whole world only when every live rank is stuck.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "dtw/comm.h"

namespace dtw::threads {

class FiberPool;

using Clock = std::chrono::steady_clock;

class World;

// One posted send or receive.
struct Op : detail::RequestState {
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

  // Guarded by World::mu_.
  enum class State { kPosted, kMatched, kDone } state = State::kPosted;
  std::shared_ptr<Op> partner;
  std::string error;  // set on both sides of a bad match
  bool error_is_abort = false;  // the error is a consequence of another rank's failure
  std::atomic<bool> done{false};
};

struct Key {
  int context, source, tag;
  auto operator<=>(const Key&) const = default;
};

class World {
 public:
  World(int size, std::chrono::milliseconds timeout);

  int size() const { return size_; }
  // Fiber mode (fibers.h): rank r is fiber r of `pool`, and a rank that waits
  // parks its fiber instead of sleeping on its condition variable. Set before
  // any rank runs.
  void use_fibers(FiberPool* pool) { fibers_ = pool; }

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
  struct RankState {
    std::condition_variable cv;
    std::atomic<std::uint64_t> wake_seq{0};
    std::map<Key, std::deque<std::shared_ptr<Op>>> unexpected;  // sends to me, unmatched
    std::map<Key, std::deque<std::shared_ptr<Op>>> posted;      // my receives, unmatched
    std::vector<std::shared_ptr<Op>> copy_jobs;                 // matched receives I copy
    std::vector<std::shared_ptr<Op>> owned;                     // my ops not yet done
    std::string abandoned;  // descriptions of requests dropped while pending
    int copies_in_flight = 0;                                   // copies touching my buffers
    // The wait this rank is in (valid while waiting).
    bool waiting = false;
    // Waiting and unable to progress: counted in World::stuck_, so that the
    // deadlock check costs O(1) per blocking call, not a scan of the world.
    bool stuck = false;
    bool finished = false;
    bool any = false;  // waits for any one of waiting_on (wait_any), not all
    const char* call = "";
    std::vector<Op*> waiting_on;
    Clock::time_point since;
    // A rank polling with test() is running, not waiting: the detector never
    // counts it as stuck, but a poll that fails for longer than the timeout,
    // with nothing of this rank completing meanwhile, is a TimeoutError.
    // Cleared whenever one of its ops completes or it blocks.
    const Op* polled = nullptr;
    Clock::time_point polling_since;
  };

  // Wake-ups are collected under mu_ and sent once it is released: a rank
  // notified while the waker still holds mu_ wakes only to block on mu_ again,
  // which on an oversubscribed machine costs two more futex calls and a
  // context switch per message.
  // Sends the wake-ups a public call collected when it returns or throws.
  class NotifyOnExit {
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
  // Releases `lock`, notifies the ranks collected by wake(), and leaves `lock`
  // released (`relock`: takes it again).
  void notify_pending(std::unique_lock<std::mutex>& lock, bool relock);
  bool test_locked(int rank, Op& op, const char* call, bool polling);  // test() but the yield

  void run_copy_jobs(int rank, std::unique_lock<std::mutex>& lock);
  static void throw_op_error(const Op& op);
  void match(const std::shared_ptr<Op>& send, const std::shared_ptr<Op>& recv, int by_rank,
             std::unique_lock<std::mutex>& lock);
  void transfer(Op& send, Op& recv);  // the copy (or reduction), outside the lock
  void mark_done(Op& op);
  void unqueue(const Op& op);  // takes a posted, unmatched op out of its queue
  void wake(int rank);
  bool can_progress(int rank) const;
  void stop_waiting(RankState& r);  // leaves the wait (and the stuck count)
  void unstick(RankState& r);       // something this rank waits for changed
  bool all_live_stuck() const;      // the full check, run when the counts say so
  void declare_deadlock();
  // A rank timed out: the first one writes the report and fails the launch,
  // so every other rank is cancelled with AbortedError naming it.
  [[noreturn]] void fail_timeout(int rank, const char* headline);
  void quiesce(int rank, std::unique_lock<std::mutex>& lock);
  // Blocks `rank` until `done()` holds (checked under mu_): its thread on its
  // condition variable, or its fiber parked with mu_ released.
  void await(int rank, std::unique_lock<std::mutex>& lock, const std::function<bool()>& done);
  // Sleeps `rank` until its wake_seq moves past `seen` or `deadline` passes
  // (or spuriously); mu_ is released meanwhile and held again on return.
  void sleep(int rank, std::unique_lock<std::mutex>& lock, std::uint64_t seen,
             Clock::time_point deadline);
  std::string wait_graph(const char* headline) const;  // in wait_graph.cpp
  void throw_if_failed(int rank, std::unique_lock<std::mutex>& lock);

  const int size_;
  const std::chrono::milliseconds timeout_;
  const bool oversubscribed_;
  FiberPool* fibers_ = nullptr;
  mutable std::mutex mu_;
  std::vector<RankState> ranks_;
  int live_;       // ranks not finished
  int stuck_ = 0;  // live ranks waiting with nothing that can progress
  std::vector<int> to_wake_;  // ranks wake() bumped; notified when mu_ is released
  bool aborted_ = false;
  int abort_rank_ = -1;
  std::string abort_kind_;
  bool deadlocked_ = false;
  std::string deadlock_report_;
  std::map<std::tuple<int, std::uint64_t, int>, int> contexts_;
  int next_context_ = 1;
};

}  // namespace dtw::threads
