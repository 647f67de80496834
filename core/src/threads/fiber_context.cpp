// Fiber stacks and the context switch (fiber_context.h).
#include "threads/fiber_context.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <system_error>

// Which sanitizer this file is built with (GCC defines __SANITIZE_*__, Clang
// answers __has_feature).
#if defined(__SANITIZE_THREAD__)
#define DTW_FIBER_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DTW_FIBER_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DTW_FIBER_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define DTW_FIBER_ASAN 1
#endif
#endif
#ifndef DTW_FIBER_TSAN
#define DTW_FIBER_TSAN 0
#endif
#ifndef DTW_FIBER_ASAN
#define DTW_FIBER_ASAN 0
#endif

// The sanitizers' fiber interface (sanitizer/tsan_interface.h and
// sanitizer/common_interface_defs.h), declared here so that a build without
// those headers still compiles; only sanitizer builds call them.
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     std::size_t* size_old);
}

#if DTW_FIBER_ASM
// dtw_fiber_switch(save, load): pushes the callee-saved registers and the
// SSE/x87 control words on the current stack, stores the stack pointer in
// *save, loads `load` as the stack pointer, and pops the same set from there:
// the `ret` at the end returns into whatever call suspended that context.
// A new context's stack is laid out (make_context) so that this `ret` lands
// in dtw_fiber_trampoline, with the entry function in rbx and its argument
// in r12.
asm(R"(
    .text
    .globl dtw_fiber_switch
    .hidden dtw_fiber_switch
    .type dtw_fiber_switch, @function
dtw_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size dtw_fiber_switch, .-dtw_fiber_switch

    .globl dtw_fiber_trampoline
    .hidden dtw_fiber_trampoline
    .type dtw_fiber_trampoline, @function
dtw_fiber_trampoline:
    movq %r12, %rdi
    callq *%rbx
    ud2
    .size dtw_fiber_trampoline, .-dtw_fiber_trampoline
)");
extern "C" void dtw_fiber_switch(void** save, void* load);
extern "C" void dtw_fiber_trampoline();
#endif

namespace dtw::threads {

FiberStack::FiberStack(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  mapped_ = size_ + page;
  // MAP_NORESERVE: thousands of stacks reserve address space, not memory;
  // only the pages a fiber touches are ever backed.
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  if (mprotect(p, page, PROT_NONE) != 0) {
    const int error = errno;
    munmap(p, mapped_);
    throw std::system_error(error, std::generic_category(), "mprotect");
  }
  mapping_ = p;
  base_ = static_cast<char*>(p) + page;
}

FiberStack::~FiberStack() {
  if (mapping_) munmap(mapping_, mapped_);
}

void init_thread_context(Context& ctx) {
#if DTW_FIBER_TSAN
  ctx.tsan_fiber = __tsan_get_current_fiber();
#else
  (void)ctx;
#endif
}

#if !DTW_FIBER_ASM
namespace {
// makecontext passes int arguments only: the entry and its argument travel as
// halves of 64-bit words.
void ucontext_entry(unsigned fn_hi, unsigned fn_lo, unsigned arg_hi, unsigned arg_lo) {
  const auto join = [](unsigned hi, unsigned lo) {
    return (static_cast<std::uintptr_t>(hi) << 32) | static_cast<std::uintptr_t>(lo);
  };
  const auto fn = reinterpret_cast<void (*)(void*)>(join(fn_hi, fn_lo));
  fn(reinterpret_cast<void*>(join(arg_hi, arg_lo)));
  std::abort();  // a fiber's entry never returns
}
}  // namespace
#endif

void make_context(Context& ctx, FiberStack& stack, void (*entry)(void*), void* arg) {
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = stack.size();
#if DTW_FIBER_TSAN
  ctx.tsan_fiber = __tsan_create_fiber(0);
#endif
#if DTW_FIBER_ASM
  // From the 16-byte aligned top down: a spare slot, then what
  // dtw_fiber_switch pops (return address, rbp, rbx, r12-r15, control words).
  // After its `ret` the stack pointer is 16-byte aligned, as the trampoline's
  // call needs.
  auto top = reinterpret_cast<std::uintptr_t>(stack.bottom()) + stack.size();
  top &= ~std::uintptr_t{15};
  auto* slot = reinterpret_cast<std::uint64_t*>(top - 80);
  std::uint32_t mxcsr = 0;
  std::uint16_t fpu_cw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_cw));
  slot[0] = mxcsr | (static_cast<std::uint64_t>(fpu_cw) << 32);      // control words
  slot[1] = 0;                                                       // r15
  slot[2] = 0;                                                       // r14
  slot[3] = 0;                                                       // r13
  slot[4] = reinterpret_cast<std::uint64_t>(arg);                    // r12
  slot[5] = reinterpret_cast<std::uint64_t>(entry);                  // rbx
  slot[6] = 0;                                                       // rbp
  slot[7] = reinterpret_cast<std::uint64_t>(&dtw_fiber_trampoline);  // return address
  ctx.sp = slot;
#else
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack.bottom();
  ctx.uc.uc_stack.ss_size = stack.size();
  ctx.uc.uc_link = nullptr;
  const auto fn = reinterpret_cast<std::uintptr_t>(entry);
  const auto a = reinterpret_cast<std::uintptr_t>(arg);
  makecontext(&ctx.uc, reinterpret_cast<void (*)()>(&ucontext_entry), 4,
              static_cast<unsigned>(fn >> 32), static_cast<unsigned>(fn),
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
#endif
}

namespace {
void raw_switch(Context& from, Context& to) {
#if DTW_FIBER_ASM
  dtw_fiber_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}
}  // namespace

void switch_context(Context& from, Context& to) {
#if DTW_FIBER_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
#if DTW_FIBER_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
#endif
  raw_switch(from, to);
#if DTW_FIBER_ASAN
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
}

void begin_context(Context& from) {
#if DTW_FIBER_ASAN
  // The first switch into a fiber tells it where the worker's stack is.
  __sanitizer_finish_switch_fiber(nullptr, &from.stack_bottom, &from.stack_size);
#else
  (void)from;
#endif
}

void exit_context(Context& from, Context& to) {
#if DTW_FIBER_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
#if DTW_FIBER_ASAN
  // nullptr: this stack's fake frames are freed, it will never run again.
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom, to.stack_size);
#endif
  raw_switch(from, to);
  std::abort();  // nothing resumes a finished fiber
}

void destroy_context(Context& ctx) {
#if DTW_FIBER_TSAN
  if (ctx.tsan_fiber) __tsan_destroy_fiber(ctx.tsan_fiber);
  ctx.tsan_fiber = nullptr;
#else
  (void)ctx;
#endif
}

}  // namespace dtw::threads
