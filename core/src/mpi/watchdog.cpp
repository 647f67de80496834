#include "mpi/watchdog.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dtw::mpi {

Watchdog& Watchdog::instance() {
  static Watchdog watchdog;
  return watchdog;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::arm(int world_rank, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  rank_ = world_rank;
  timeout_ = timeout;
  armed_ = true;
  blocked_ = false;
  recent_count_ = 0;
  active_ = Clock::now();
  silence_reported_ = false;
  polling_ = false;
  if (!running_) {
    running_ = true;
    thread_ = std::thread([this] { loop(); });
  }
}

void Watchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
  blocked_ = false;
  polling_ = false;
}

void Watchdog::block(const char* what, const PendingOp* pending, std::size_t n) {
  std::lock_guard lock(mu_);
  blocked_ = true;
  polling_ = false;  // a blocking call is not a poll; its end is progress
  since_ = Clock::now();
  what_ = what;
  pending_.assign(pending, pending + n);
}

void Watchdog::unblock() {
  std::lock_guard lock(mu_);
  blocked_ = false;
  active_ = Clock::now();
  silence_reported_ = false;
}

void Watchdog::touch() {
  std::lock_guard lock(mu_);
  active_ = Clock::now();
  silence_reported_ = false;
}

void Watchdog::polled(const PendingOp& op) {
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  active_ = now;
  silence_reported_ = false;
  if (!polling_) {
    polling_ = true;
    poll_since_ = now;
    polled_.clear();
  }
  if (polled_.size() == kMaxPolled) return;
  for (const PendingOp& p : polled_)
    if (p.peer == op.peer && p.tag == op.tag && p.is_send == op.is_send && p.bytes == op.bytes)
      return;
  polled_.push_back(op);
}

void Watchdog::progressed() {
  std::lock_guard lock(mu_);
  polling_ = false;
  active_ = Clock::now();
  silence_reported_ = false;
}

void Watchdog::note_collective(std::string_view name) {
  std::lock_guard lock(mu_);
  recent_[recent_count_++ % recent_.size()] = name;
  active_ = Clock::now();
  silence_reported_ = false;
}

void Watchdog::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  running_ = false;
}

// "dtw mpi watchdog: rank R (host H, pid P)": how every report starts.
std::string Watchdog::who_locked() const {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::ostringstream out;
  out << "dtw mpi watchdog: rank " << rank_ << " (host " << host << ", pid " << getpid() << ")";
  return out.str();
}

// "irecv from rank 1, tag 7, 64 bytes" and a newline.
std::string Watchdog::describe(const PendingOp& p) {
  std::ostringstream out;
  out << p.op << (p.is_send ? " to rank " : " from rank ") << p.peer << ", tag " << p.tag << ", "
      << p.bytes << " bytes\n";
  return out.str();
}

std::string Watchdog::report_locked(double waited_s) const {
  std::ostringstream out;
  out << who_locked() << " has been blocked in " << what_ << " for " << waited_s << " s (timeout "
      << timeout_.count() / 1000.0 << " s)\n";
  if (pending_.empty()) out << "  rank " << rank_ << " pending: (inside an MPI collective)\n";
  for (const PendingOp& p : pending_) out << "  rank " << rank_ << " pending: " << describe(p);
  out << recent_locked();
  return out.str();
}

std::string Watchdog::silent_report_locked(double silent_s) const {
  std::ostringstream out;
  out << who_locked() << " has made no dtw call for " << silent_s << " s (timeout "
      << timeout_.count() / 1000.0 << " s): if the job hangs, rank " << rank_
      << " is the silent rank the others wait for (computing, or stuck in its own code)\n";
  out << recent_locked();
  return out.str();
}

std::string Watchdog::polling_report_locked(double polled_s) const {
  std::ostringstream out;
  out << who_locked() << " has been polling with test for " << polled_s << " s (timeout "
      << timeout_.count() / 1000.0
      << " s) while none of its operations completed: treated as blocked\n";
  for (const PendingOp& p : polled_) out << "  rank " << rank_ << " polls for: " << describe(p);
  out << recent_locked();
  return out.str();
}

std::string Watchdog::recent_locked() const {
  std::ostringstream out;
  out << "  rank " << rank_ << " last collectives entered:";
  if (recent_count_ == 0) out << " (none)";
  const std::size_t n = std::min(recent_count_, recent_.size());
  for (std::size_t i = recent_count_ - n; i < recent_count_; ++i)
    out << " " << recent_[i % recent_.size()];
  out << "\n";
  return out.str();
}

void Watchdog::abort_job(const std::string& report, std::unique_lock<std::mutex>& lock) {
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
  lock.unlock();
  // The other blocked ranks reach their own timeout about now: let them print
  // too before the abort tears the job down.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::fprintf(stderr, "dtw mpi watchdog: rank %d aborts the job (exit code %d)\n", rank_,
               kWatchdogExitCode);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
  _exit(kWatchdogExitCode);  // MPI_Abort does not return; this is for safety
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_ || !armed_) continue;
    const Clock::time_point now = Clock::now();
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    if (blocked_) {
      if (now - since_ >= timeout_) abort_job(report_locked(seconds(now - since_)), lock);
      continue;
    }
    // Polling with nothing completing for the timeout is a wait in disguise.
    if (polling_ && now - poll_since_ >= timeout_)
      abort_job(polling_report_locked(seconds(now - poll_since_)), lock);
    // Once per silence: a rank outside every dtw call for the timeout.
    if (!silence_reported_ && now - active_ >= timeout_) {
      silence_reported_ = true;
      const std::string report = silent_report_locked(seconds(now - active_));
      std::fputs(report.c_str(), stderr);
      std::fflush(stderr);
    }
  }
}

}  // namespace dtw::mpi
