#pragma once
/// @file
/// The exceptions dtw throws and the check macros that raise them.
///
/// Every error names where it was raised (file:line) and, once it has crossed
/// `dtw::launch`, the rank it was raised on. Check macros put the offending
/// values into the message, so a failure reads like
/// `rank 2: recv from rank 5: peer out of range [0, 4) [core/src/comm.cpp:41]`.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dtw {

/// Base of every exception dtw throws.
class Error : public std::exception {
 public:
  /// `message` says what went wrong with the values involved; `file`/`line` where.
  Error(std::string message, const char* file = "", int line = 0);
  /// "rank R: message [file:line]" (the rank part only once it is known).
  const char* what() const noexcept override { return what_.c_str(); }
  /// The message without rank and location.
  const std::string& message() const { return message_; }
  /// The rank the error was raised on, or -1 when not known.
  int rank() const { return rank_; }
  /// Records the rank (done by `dtw::launch` if the raiser did not).
  void set_rank(int rank);
  /// Short class name used in reports ("InvalidArgument", "DeadlockError", ...).
  virtual const char* kind() const { return "Error"; }
  /// Appends a line of context to what(), as "\n  while: <note>": what the
  /// program was doing when the error was raised (tests name the case they ran).
  void add_note(const std::string& note);
  /// The notes added so far, in the order they were added.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void format();
  std::string message_, where_, what_;
  std::vector<std::string> notes_;
  int rank_ = -1;
};

#define DTW_DEFINE_ERROR(Name, Base)                       \
  class Name : public Base {                               \
   public:                                                 \
    using Base::Base;                                      \
    const char* kind() const override { return #Name; }   \
  }

/// A caller passed a value the operation cannot accept (peer, count, tag, root, size...).
DTW_DEFINE_ERROR(InvalidArgument, Error);
/// A lab step that has not been written yet (`DTW_TODO`).
DTW_DEFINE_ERROR(NotImplemented, Error);
/// Every live rank is blocked and none can make progress; the message holds the wait-for graph.
DTW_DEFINE_ERROR(DeadlockError, Error);
/// A rank waited longer than `LaunchOptions::timeout` for a peer that never came.
DTW_DEFINE_ERROR(TimeoutError, DeadlockError);
/// This rank's call was cancelled because another rank failed first.
DTW_DEFINE_ERROR(AbortedError, Error);
/// Ranks of one group entered different collectives (or with different arguments).
DTW_DEFINE_ERROR(CollectiveMismatch, InvalidArgument);
/// A CUDA runtime call or kernel launch failed.
DTW_DEFINE_ERROR(CudaError, Error);
/// An NCCL call failed.
DTW_DEFINE_ERROR(NcclError, Error);
/// An MPI call failed.
DTW_DEFINE_ERROR(MpiError, Error);
/// A rank asked its memory ledger for more than its cap (`LaunchOptions::memory_cap`).
DTW_DEFINE_ERROR(OutOfMemory, Error);

#undef DTW_DEFINE_ERROR

namespace detail {
/// Accumulates `<<`-formatted pieces of an error message.
class Message {
 public:
  template <class T>
  Message& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  std::string str() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
};

template <class E>
[[noreturn]] void raise(const Message& message, const char* file, int line) {
  throw E(message.str(), file, line);
}
}  // namespace detail
}  // namespace dtw

/// Throws `ErrorType` with the streamed message when `cond` is false:
/// `DTW_CHECK(n >= 0, dtw::InvalidArgument, "count " << n << " is negative");`
#define DTW_CHECK(cond, ErrorType, msg)                                                   \
  do {                                                                                    \
    if (!(cond)) ::dtw::detail::raise<ErrorType>(::dtw::detail::Message() << msg,         \
                                                  __FILE__, __LINE__);                    \
  } while (0)

/// Throws dtw::InvalidArgument when `cond` is false.
#define DTW_CHECK_ARG(cond, msg) DTW_CHECK(cond, ::dtw::InvalidArgument, msg)

/// Throws dtw::InvalidArgument unless `a == b`, printing both values.
#define DTW_CHECK_EQ(a, b, msg)                                                        \
  do {                                                                                 \
    const auto& dtw_a_ = (a);                                                          \
    const auto& dtw_b_ = (b);                                                          \
    if (!(dtw_a_ == dtw_b_))                                                           \
      ::dtw::detail::raise<::dtw::InvalidArgument>(                                    \
          ::dtw::detail::Message() << msg << ": " #a " = " << dtw_a_ << " but " #b " = " \
                                   << dtw_b_,                                          \
          __FILE__, __LINE__);                                                         \
  } while (0)

/// Marks a lab step the learner has not written yet; throws dtw::NotImplemented.
/// The message starts with the step number ("01.4: ...") so `dtw check` can match it.
/// The message ends in "(NotImplemented)" so that test output, which shows only
/// what(), still says which kind of failure it is.
#define DTW_TODO(msg)                                                                      \
  ::dtw::detail::raise<::dtw::NotImplemented>(::dtw::detail::Message() << msg << " (NotImplemented)", \
                                              __FILE__, __LINE__)
