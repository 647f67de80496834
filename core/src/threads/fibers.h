#pragma once
// The fiber mode of the threads backend: a world much larger than the machine
// runs its rank bodies as fibers, a few worker threads (one per hardware
// thread) each running a contiguous block of them. A rank that must wait
// parks its fiber and its worker runs the next ready one: a switch in user
// space (fiber_context.h) instead of an OS thread going to sleep and another
// waking, which is what made a 1024-rank ring allreduce take 17 s on two cores.
//
// The rules that keep this correct (docs/architecture.md, "Fiber mode"):
// - a fiber never migrates: it runs on its worker from start to end, so
//   thread_local state and the OS thread a mutex was locked on stay put;
// - nothing holds a lock across a park or a yield (World releases its rank locks first),
//   so a fiber never blocks its worker on a lock another fiber of the same
//   worker holds;
// - a parked fiber re-checks its condition after every resume: park() may
//   return early (its deadline, a spurious wake).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "threads/fiber_context.h"

namespace dtw::threads {

// Each fiber's stack, virtual size: pages are backed only as they are used.
// As large as the default of many thread libraries' secondary threads; a
// rank body needs a few KiB for the collectives, more for deep recursion.
inline constexpr std::size_t kFiberStackBytes = std::size_t{1} << 20;

class FiberPool {
 public:
  using Clock = std::chrono::steady_clock;

  // `count` fibers in contiguous blocks on `workers` threads.
  FiberPool(int count, int workers);
  ~FiberPool();
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  int workers() const { return static_cast<int>(workers_.size()); }

  // Maps every fiber's stack of `stack_bytes`. Returns how many it mapped:
  // fewer than `count` when the system refused one, with the reason in
  // `*error`; run() may only follow a full success.
  int map_stacks(std::size_t stack_bytes, std::string* error);

  // Runs body(i) on fiber i for every i and returns when all have returned.
  // `body` must not throw (an exception leaving it terminates, as one
  // leaving a std::thread's function does).
  void run(const std::function<void(int)>& body);

  // Called by fiber `self`: suspends it until `seq` differs from `seen`
  // (after a wake(self)) or `deadline` passes; the other fibers of its worker
  // run meanwhile. May return early: the caller re-checks its condition.
  void park(int self, const std::atomic<std::uint64_t>& seq, std::uint64_t seen,
            Clock::time_point deadline);
  // Called by fiber `self`: lets every other ready fiber of its worker run
  // once, then continues (a rank polling with test must not starve the peer
  // it polls for).
  void yield(int self);
  // From any fiber or thread: fiber i's wake condition may have changed.
  void wake(int i);

 private:
  struct Worker;
  struct Fiber {
    Context ctx;
    std::unique_ptr<FiberStack> stack;
    FiberPool* pool = nullptr;
    Worker* worker = nullptr;
    int index = 0;
    enum class Why { kPark, kYield, kDone } why = Why::kYield;  // why it switched out
    // What a parked fiber waits for (written by the fiber before it parks).
    const std::atomic<std::uint64_t>* seq = nullptr;
    std::uint64_t seen = 0;
    Clock::time_point deadline;
    bool parked = false;  // guarded by worker->mu
    // This fiber's C++ exception state (the caught-exception stack and the
    // uncaught count, which the runtime keeps per thread) while it is
    // suspended: a fiber may yield inside a catch block or during unwinding.
    void* caught_exceptions = nullptr;
    unsigned uncaught_exceptions = 0;
  };
  struct Worker {
    std::mutex mu;
    std::condition_variable idle_cv;  // the worker sleeps here when no fiber is ready
    bool sleeping = false;            // guarded by mu
    std::deque<Fiber*> ready;         // guarded by mu
    std::vector<Fiber*> fibers;       // its block, for deadline scans
    int live = 0;                     // fibers not finished (worker thread only)
    Context ctx;                      // the worker thread's own context
    Clock::time_point last_scan;
  };

  static void fiber_main(void* arg);
  void work(Worker& w);
  void resume(Worker& w, Fiber& f);
  void after_switch(Worker& w, Fiber& f);
  void scan_deadlines(Worker& w, Clock::time_point now);
  void idle(Worker& w, int empty_passes);

  std::vector<Fiber> fibers_;
  std::vector<std::unique_ptr<Worker>> workers_;
  const std::function<void(int)>* body_ = nullptr;
};

}  // namespace dtw::threads
