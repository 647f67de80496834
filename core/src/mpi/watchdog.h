#pragma once
// The MPI backend's hang watchdog. A rank blocked in one MPI call for longer
// than the timeout prints what it waits for (its pending operations and the
// last collectives it entered), gives the other ranks a moment to print
// theirs, and aborts the whole job with kWatchdogExitCode. A rank that polls
// (Comm::test) for as long with none of its operations completing and nothing
// posted is treated the same way: it prints what it polls for and aborts, as
// the threads backend's test() throws TimeoutError. A rank that has
// made no dtw call for as long says so once (it does not abort): in a hang,
// that is the silent rank the others wait for, computing or stuck in its own
// code, which would otherwise print nothing. One per process.
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dtw::mpi {

inline constexpr int kWatchdogExitCode = 3;

/// One operation a blocked rank waits for, as the report prints it.
struct PendingOp {
  const char* op = "";
  int peer = -1;  // world rank, -1 for collectives
  int tag = 0;
  std::int64_t bytes = 0;
  bool is_send = false;
};

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  static Watchdog& instance();
  ~Watchdog();

  /// Starts the thread (once) and sets this launch's timeout and rank.
  void arm(int world_rank, std::chrono::milliseconds timeout);
  /// Stops watching until the next arm (between launches).
  void disarm();
  /// This rank now blocks in `what` waiting for `pending`.
  void block(const char* what, const PendingOp* pending, std::size_t n);
  void unblock();
  /// This rank made a call that does not block: it is not silent.
  void touch();
  /// This rank polled (Comm::test) `op` and it has not completed. The first
  /// such poll since this rank last made progress starts the poll clock; the
  /// first few distinct operations polled are kept for the report. O(1).
  void polled(const PendingOp& op);
  /// One of this rank's operations completed, or it posted one: the poll
  /// clock stops (a rank whose polls complete now and then is never stopped).
  void progressed();
  /// Remembers the name of a collective this rank entered (a ring of the last few).
  void note_collective(std::string_view name);
  /// Stops the thread (at exit).
  void stop();

 private:
  Watchdog() = default;
  void loop();
  std::string report_locked(double waited_s) const;
  std::string silent_report_locked(double silent_s) const;
  std::string polling_report_locked(double polled_s) const;
  std::string recent_locked() const;  // "  rank R last collectives entered: ..."
  std::string who_locked() const;     // "dtw mpi watchdog: rank R (host H, pid P)"
  static std::string describe(const PendingOp& p);  // "irecv from rank 1, tag 7, 64 bytes\n"
  // Prints `report`, lets the other ranks print theirs, aborts the job.
  [[noreturn]] void abort_job(const std::string& report, std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool running_ = false, stopping_ = false, armed_ = false, blocked_ = false;
  int rank_ = -1;
  std::chrono::milliseconds timeout_{60'000};
  Clock::time_point since_;
  Clock::time_point active_;  // the end of this rank's last dtw call (or the arm)
  bool silence_reported_ = false;
  // Polling with test() since poll_since_, nothing completing or posted.
  bool polling_ = false;
  Clock::time_point poll_since_;
  static constexpr std::size_t kMaxPolled = 4;
  std::vector<PendingOp> polled_;  // distinct operations polled, at most kMaxPolled
  const char* what_ = "";
  std::vector<PendingOp> pending_;
  // Copies: a name may come from a caller's temporary string.
  std::array<std::string, 8> recent_{};
  std::size_t recent_count_ = 0;
};

/// Marks the current scope as blocked for the watchdog.
class BlockedScope {
 public:
  BlockedScope(const char* what, const PendingOp* pending = nullptr, std::size_t n = 0) {
    Watchdog::instance().block(what, pending, n);
  }
  ~BlockedScope() { Watchdog::instance().unblock(); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;
};

}  // namespace dtw::mpi
