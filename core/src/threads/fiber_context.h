#pragma once
// A user-space execution context for the fiber mode of the threads backend
// (fibers.h): a stack of its own and a switch between two contexts that never
// enters the kernel.
//
// The switch saves only what the C++ calling convention says a function call
// preserves. On x86-64 (System V) that is rbx, rbp, r12-r15, the stack pointer
// and the control words of SSE and x87: a dozen instructions, some 10 ns,
// against the several microseconds of putting an OS thread to sleep and waking
// another. Elsewhere the portable fallback is POSIX ucontext (swapcontext),
// which is slower (it saves the signal mask with a system call) but correct.
//
// Sanitizers keep per-stack books: the switch tells ThreadSanitizer
// (__tsan_switch_to_fiber) and AddressSanitizer (__sanitizer_*_switch_fiber)
// which stack runs next, so both keep working in fiber mode.
#include <cstddef>

#if defined(__x86_64__) && !defined(DTW_FIBER_UCONTEXT)
#define DTW_FIBER_ASM 1
#else
#define DTW_FIBER_ASM 0
#include <ucontext.h>
#endif

namespace dtw::threads {

// A fiber's stack: mapped on creation (pages are touched, and cost memory,
// only as the fiber uses them), with one inaccessible guard page below it so
// that an overflow faults at once instead of corrupting the next stack.
class FiberStack {
 public:
  // Maps `bytes` (rounded up to whole pages) plus the guard page; throws
  // std::system_error with the mmap error when the system refuses.
  explicit FiberStack(std::size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return base_; }  // lowest usable address
  std::size_t size() const { return size_; }

 private:
  void* mapping_ = nullptr;  // guard page + stack
  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
};

// One side of a switch: where a suspended context resumes, and what the
// sanitizers need to know about its stack.
struct Context {
#if DTW_FIBER_ASM
  void* sp = nullptr;  // the saved registers sit on the context's own stack
#else
  ucontext_t uc{};
#endif
  void* tsan_fiber = nullptr;          // ThreadSanitizer's handle (sanitizer builds)
  void* asan_fake_stack = nullptr;     // AddressSanitizer's fake stack while suspended
  const void* stack_bottom = nullptr;  // for AddressSanitizer; learnt for a thread's own stack
  std::size_t stack_size = 0;
};

// Makes `ctx` the context of the thread that calls it (a worker's own stack).
void init_thread_context(Context& ctx);
// Prepares `ctx` to run entry(arg) on `stack` at its first resume. `entry`
// must never return: a finished fiber switches away with exit_context.
void make_context(Context& ctx, FiberStack& stack, void (*entry)(void*), void* arg);
// Suspends the running context into `from` and resumes `to`; returns when
// something switches back to `from`.
void switch_context(Context& from, Context& to);
// The first thing a new fiber's entry calls: completes the switch into it
// (AddressSanitizer learns the stack it came from, `from`).
void begin_context(Context& from);
// Leaves a finished fiber for good (its stack may then be unmapped).
[[noreturn]] void exit_context(Context& from, Context& to);
// Frees what a sanitizer holds for a finished fiber's context.
void destroy_context(Context& ctx);

}  // namespace dtw::threads
