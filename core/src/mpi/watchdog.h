#pragma once
// The MPI backend's hang watchdog, one per process. A rank blocked in one MPI
// call for longer than the timeout, or polling (Comm::test) for as long with
// none of its operations completing and nothing posted (a wait in disguise,
// as the threads backend's test() throws TimeoutError), raises the alarm: it
// sends its state to every rank of the job, and every rank that hears it
// answers with its own (blocked, polling, silent, running, or finished). After
// a grace period the lowest rank that answered prints ONE report for the job,
// bounded like the threads backend's deadlock report (16 ranks in full, the
// rest counted by state), and aborts the job with kWatchdogExitCode. The
// report names the ranks the blocked ones wait for that are not blocked
// themselves: a silent rank (computing, or stuck in its own code), or one that
// answered nothing at all (stopped with SIGSTOP, killed, or unable to run).
// A rank that has made no dtw call for the timeout also says so once itself,
// without aborting. Time during which this process did not run at all (it was
// stopped, or not scheduled: the watchdog's own heartbeat jumped) is not
// counted as blocking, polling or silence.
#include <mpi.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
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

/// What one rank tells the job when the alarm is raised (sent as text).
struct RankStatus {
  enum Kind : int { kBlocked = 0, kPolling, kSilent, kRunning, kOutside };
  int rank = -1;
  int kind = kRunning;
  std::int64_t timeout_ms = 0;
  std::string state;          ///< short, for counting: "blocked in recv"
  std::string detail;         ///< the lines shown when the rank is shown in full
  std::vector<int> waits_on;  ///< world ranks of its pending (or polled) operations
  std::string encode() const;
  static bool decode(std::string_view text, RankStatus& out);
};

/// The job's report from the statuses that came in (`world` ranks, those
/// missing answered nothing). Pure, so that it can be tested without MPI.
std::string job_report(int world, const std::map<int, RankStatus>& statuses,
                       std::int64_t timeout_ms);

/// "irecv from rank 1, tag 7, 64 bytes" and a newline (watchdog_report.cpp).
std::string describe(const PendingOp& p);
/// Seconds with one decimal: "12.3".
std::string tenths(double s);

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  static Watchdog& instance();
  ~Watchdog();

  /// The communicator (over every process, the watchdogs' own) on which they
  /// tell each other their state. Without it (MPI not initialised for
  /// MPI_THREAD_MULTIPLE), each rank prints its own report and aborts.
  void set_channel(MPI_Comm channel);
  /// Starts the thread (once) and sets this launch's timeout, rank and size.
  void arm(int world_rank, int world_size, std::chrono::milliseconds timeout);
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
  /// Stops the thread (at exit, before MPI_Finalize).
  void stop();

 private:
  Watchdog() = default;
  void loop();
  // The process did not run for `lost` (stopped, or not scheduled): no clock counts it.
  void not_running_locked(Clock::duration lost, Clock::time_point now);
  RankStatus status_locked(Clock::time_point now) const;
  std::string recent_locked() const;  // "last collectives entered: ..."
  std::string who_locked() const;     // "rank R (host H, pid P)"
  // This rank's watchdog fired, or another's status came in: tell every rank.
  void raise_alarm_locked(Clock::time_point now, std::unique_lock<std::mutex>& lock);
  void receive_locked(std::unique_lock<std::mutex>& lock);  // the statuses other ranks sent
  void send_status_locked(const RankStatus& status);
  void silent_notice_locked(double silent_s);
  // Prints `report` (if any), gives the others a moment, and aborts the job.
  [[noreturn]] void abort_job(const std::string& report, std::unique_lock<std::mutex>& lock,
                              std::chrono::milliseconds pause);

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool running_ = false, stopping_ = false, armed_ = false, blocked_ = false;
  int rank_ = -1, world_ = 0;
  std::chrono::milliseconds timeout_{60'000};
  Clock::time_point since_;
  Clock::duration stopped_in_block_{};  // of since_..now, time the process did not run
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
  // The alarm: this rank's watchdog fired, or another's status came in.
  MPI_Comm channel_ = MPI_COMM_NULL;
  bool alarmed_ = false;
  Clock::time_point alarm_deadline_;
  std::map<int, RankStatus> statuses_;            // by world rank, this rank's own included
  std::vector<std::unique_ptr<std::string>> out_;  // send buffers, alive until the abort
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
