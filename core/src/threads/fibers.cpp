// The fiber scheduler of the threads backend (fibers.h): per worker, a queue
// of ready fibers run one after another; a parked fiber is put back on it by
// wake() or when its deadline passes.
#include "threads/fibers.h"

#include <cxxabi.h>
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

namespace dtw::threads {
namespace {

using namespace std::chrono_literals;

// Parked fibers' deadlines are looked at about this often while the worker
// has other fibers to run (when it has none, at once).
constexpr auto kScanEvery = 1ms;
// An idle worker first gives its core away this many times (sched_yield: a
// peer on another worker is likely about to wake one of its fibers), then
// sleeps until a wake-up arrives or the next deadline, at most kMaxSleep
// (a safety net only: every wake-up of a sleeping worker notifies it).
constexpr int kYieldPasses = 16;
// Before that, it spins this many passes of about a microsecond each: a
// worker whose fibers wait for another worker's usually has one woken within
// microseconds, and a sched_yield on a busy machine can give the core away
// for a whole time slice, stalling every fiber of this worker meanwhile.
constexpr int kSpinPasses = 32;
constexpr int kPausesPerSpinPass = 64;
constexpr auto kMaxSleep = 100ms;

// The C++ runtime's per-thread exception state (libstdc++'s and libc++abi's
// __cxa_eh_globals begin with these two fields).
struct EhGlobals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
};

EhGlobals* eh_globals() {
  return reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals());
}

}  // namespace

FiberPool::FiberPool(int count, int workers) : fibers_(static_cast<std::size_t>(count)) {
  workers = std::max(1, std::min(workers, count));
  for (int w = 0; w < workers; ++w) workers_.push_back(std::make_unique<Worker>());
  // Contiguous blocks: ranks that talk to their neighbours (a ring, a tree's
  // lower levels) mostly wake fibers of their own worker, with no hand-over
  // between threads.
  for (int i = 0; i < count; ++i) {
    Fiber& f = fibers_[static_cast<std::size_t>(i)];
    f.pool = this;
    f.index = i;
    f.worker =
        workers_[static_cast<std::size_t>(static_cast<std::int64_t>(i) * workers / count)].get();
    f.worker->fibers.push_back(&f);
  }
}

FiberPool::~FiberPool() = default;

int FiberPool::map_stacks(std::size_t stack_bytes, std::string* error) {
  for (std::size_t i = 0; i < fibers_.size(); ++i) {
    try {
      fibers_[i].stack = std::make_unique<FiberStack>(stack_bytes);
    } catch (const std::system_error& e) {
      *error = e.what();
      return static_cast<int>(i);
    } catch (const std::bad_alloc&) {
      *error = "std::bad_alloc";
      return static_cast<int>(i);
    }
  }
  return static_cast<int>(fibers_.size());
}

void FiberPool::fiber_main(void* arg) {
  Fiber& f = *static_cast<Fiber*>(arg);
  begin_context(f.worker->ctx);
  (*f.pool->body_)(f.index);  // an exception here terminates: nothing above catches it
  f.why = Fiber::Why::kDone;
  exit_context(f.ctx, f.worker->ctx);
}

void FiberPool::run(const std::function<void(int)>& body) {
  body_ = &body;
  for (auto& w : workers_) {
    for (Fiber* f : w->fibers) {
      make_context(f->ctx, *f->stack, &FiberPool::fiber_main, f);
      w->ready.push_back(f);
    }
    w->live = static_cast<int>(w->fibers.size());
  }
  // Started together, so that a thread the system refuses (std::system_error
  // out of here) leaves no fiber half run: the others have not begun.
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  enum class Gate { kWait, kGo, kCancel } gate = Gate::kWait;
  std::vector<std::jthread> threads;
  auto open = [&](Gate g) {
    {
      std::lock_guard lock(gate_mu);
      gate = g;
    }
    gate_cv.notify_all();
  };
  try {
    for (auto& w : workers_) {
      threads.emplace_back([&, worker = w.get()] {
        {
          std::unique_lock lock(gate_mu);
          gate_cv.wait(lock, [&] { return gate != Gate::kWait; });
          if (gate == Gate::kCancel) return;
        }
        work(*worker);
      });
    }
  } catch (...) {
    open(Gate::kCancel);
    throw;
  }
  open(Gate::kGo);
}  // the workers join here, when every fiber has finished

void FiberPool::work(Worker& w) {
  init_thread_context(w.ctx);
  w.last_scan = Clock::now();
  int empty_passes = 0;
  int since_scan = 0;
  while (w.live > 0) {
    Fiber* f = nullptr;
    {
      std::lock_guard lock(w.mu);
      if (!w.ready.empty()) {
        f = w.ready.front();
        w.ready.pop_front();
      }
    }
    if (f == nullptr) {
      idle(w, empty_passes++);
      continue;
    }
    empty_passes = 0;
    resume(w, *f);
    after_switch(w, *f);
    // Reading the clock costs about as much as a switch: every 64 switches.
    if (++since_scan >= 64) {
      since_scan = 0;
      const Clock::time_point now = Clock::now();
      if (now - w.last_scan >= kScanEvery) scan_deadlines(w, now);
    }
  }
}

// Switches into `f` with its exception state, and back out with it saved.
void FiberPool::resume(Worker& w, Fiber& f) {
  EhGlobals* eh = eh_globals();
  const EhGlobals mine = *eh;
  eh->caught_exceptions = f.caught_exceptions;
  eh->uncaught_exceptions = f.uncaught_exceptions;
  switch_context(w.ctx, f.ctx);
  f.caught_exceptions = eh->caught_exceptions;
  f.uncaught_exceptions = eh->uncaught_exceptions;
  *eh = mine;
}

void FiberPool::after_switch(Worker& w, Fiber& f) {
  switch (f.why) {
    case Fiber::Why::kDone:
      --w.live;
      destroy_context(f.ctx);
      f.stack.reset();  // its memory goes back now, not at the end of the launch
      return;
    case Fiber::Why::kYield: {
      std::lock_guard lock(w.mu);
      w.ready.push_back(&f);
      return;
    }
    case Fiber::Why::kPark: {
      // Under w.mu, as wake() looks at `parked`: a wake-up that came between
      // the fiber reading `seen` and this point has changed `seq` already.
      std::lock_guard lock(w.mu);
      if (f.seq->load(std::memory_order_acquire) != f.seen) w.ready.push_back(&f);
      else f.parked = true;
      return;
    }
  }
}

void FiberPool::scan_deadlines(Worker& w, Clock::time_point now) {
  w.last_scan = now;
  std::lock_guard lock(w.mu);
  for (Fiber* f : w.fibers) {
    if (f->parked && now >= f->deadline) {
      f->parked = false;
      w.ready.push_back(f);
    }
  }
}

// No fiber of this worker is ready: every one is parked (waiting for a fiber
// of another worker, or for its deadline) or finished.
void FiberPool::idle(Worker& w, int empty_passes) {
  if (empty_passes < kSpinPasses) {
    for (int i = 0; i < kPausesPerSpinPass; ++i) _mm_pause();
    return;
  }
  const Clock::time_point now = Clock::now();
  scan_deadlines(w, now);
  if (empty_passes < kSpinPasses + kYieldPasses) {
    sched_yield();
    return;
  }
  std::unique_lock lock(w.mu);
  if (!w.ready.empty()) return;
  Clock::time_point until = now + kMaxSleep;
  for (const Fiber* f : w.fibers)
    if (f->parked) until = std::min(until, f->deadline);
  w.sleeping = true;
  w.idle_cv.wait_until(lock, until, [&] { return !w.ready.empty(); });
  w.sleeping = false;
}

void FiberPool::park(int self, const std::atomic<std::uint64_t>& seq, std::uint64_t seen,
                     Clock::time_point deadline) {
  Fiber& f = fibers_[static_cast<std::size_t>(self)];
  f.seq = &seq;
  f.seen = seen;
  f.deadline = deadline;
  f.why = Fiber::Why::kPark;
  switch_context(f.ctx, f.worker->ctx);
}

void FiberPool::yield(int self) {
  Fiber& f = fibers_[static_cast<std::size_t>(self)];
  f.why = Fiber::Why::kYield;
  switch_context(f.ctx, f.worker->ctx);
}

void FiberPool::wake(int i) {
  Fiber& f = fibers_[static_cast<std::size_t>(i)];
  Worker& w = *f.worker;
  bool notify = false;
  {
    std::lock_guard lock(w.mu);
    if (!f.parked) return;  // running, ready, or not yet parked (it re-checks seq)
    f.parked = false;
    w.ready.push_back(&f);
    notify = w.sleeping;
  }
  if (notify) w.idle_cv.notify_one();
}

}  // namespace dtw::threads
