#include "mpi/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace dtw::mpi {
namespace {

using Clock = Watchdog::Clock;
using std::chrono::milliseconds;

constexpr milliseconds kTick{100};  // the watchdog's heartbeat
// A heartbeat this much later than kTick: the process did not run meanwhile
// (SIGSTOP, a debugger, or a machine too loaded to schedule it).
constexpr milliseconds kStall{1000};
constexpr int kStatusTag = 1;
constexpr std::size_t kOpsPerRank = 4;      // pending operations shown per rank
// Once the printer should have aborted the job and has not, another rank does.
constexpr milliseconds kFallback{5000};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// How long the ranks that raised or heard the alarm wait for every answer.
milliseconds grace(int world) { return std::min(milliseconds(10'000), milliseconds(2000 + 50 * world)); }

}  // namespace

Watchdog& Watchdog::instance() {
  static Watchdog watchdog;
  return watchdog;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::set_channel(MPI_Comm channel) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  std::lock_guard lock(mu_);
  // The watchdog thread may only call MPI beside the rank's own calls when
  // the library allows every thread to.
  channel_ = provided == MPI_THREAD_MULTIPLE ? channel : MPI_COMM_NULL;
}

void Watchdog::arm(int world_rank, int world_size, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  rank_ = world_rank;
  world_ = world_size;
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
  stopped_in_block_ = Clock::duration::zero();
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

// "rank R (host H, pid P)": how every rank's part of a report starts.
std::string Watchdog::who_locked() const {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::ostringstream out;
  out << "rank " << rank_ << " (host " << host << ", pid " << getpid() << ")";
  return out.str();
}

std::string Watchdog::recent_locked() const {
  std::ostringstream out;
  out << "last collectives entered:";
  if (recent_count_ == 0) out << " (none)";
  const std::size_t n = std::min(recent_count_, recent_.size());
  for (std::size_t i = recent_count_ - n; i < recent_count_; ++i)
    out << " " << recent_[i % recent_.size()];
  out << "\n";
  return out.str();
}

RankStatus Watchdog::status_locked(Clock::time_point now) const {
  RankStatus s;
  s.rank = rank_;
  s.timeout_ms = timeout_.count();
  std::ostringstream d;
  d << "  " << who_locked() << " ";
  const auto ops = [&](const std::vector<PendingOp>& list, const char* label) {
    for (std::size_t i = 0; i < list.size() && i < kOpsPerRank; ++i) {
      d << "    " << label << ": " << describe(list[i]);
      const int p = list[i].peer;
      if (p >= 0 && std::find(s.waits_on.begin(), s.waits_on.end(), p) == s.waits_on.end())
        s.waits_on.push_back(p);
    }
    if (list.size() > kOpsPerRank) d << "    ... and " << list.size() - kOpsPerRank << " more\n";
    for (std::size_t i = kOpsPerRank; i < list.size(); ++i) {
      const int p = list[i].peer;
      if (p >= 0 && std::find(s.waits_on.begin(), s.waits_on.end(), p) == s.waits_on.end())
        s.waits_on.push_back(p);
    }
  };
  if (!armed_) {
    s.kind = RankStatus::kOutside;
    s.state = "outside the launch (its rank function returned)";
    d << "is " << s.state << "\n";
    s.detail = d.str();
    return s;
  }
  if (blocked_) {
    s.kind = RankStatus::kBlocked;
    s.state = std::string("blocked in ") + what_;
    d << s.state << " for " << tenths(seconds(now - since_)) << " s";
    if (stopped_in_block_ > Clock::duration::zero())
      d << " (not counting " << tenths(seconds(stopped_in_block_))
        << " s while this process did not run)";
    d << "\n";
    if (pending_.empty()) d << "    pending: (inside an MPI collective)\n";
    ops(pending_, "pending");
  } else if (polling_) {
    s.kind = RankStatus::kPolling;
    s.state = "polling with test, nothing completing";
    d << "has been polling with test for " << tenths(seconds(now - poll_since_))
      << " s while none of its operations completed\n";
    ops(polled_, "polls for");
  } else if (now - active_ >= 2 * kTick) {
    s.kind = RankStatus::kSilent;
    s.state = "silent (no dtw call: computing, or stuck in its own code)";
    d << "has made no dtw call for " << tenths(seconds(now - active_))
      << " s (computing, or stuck in its own code)\n";
  } else {
    s.kind = RankStatus::kRunning;
    s.state = "running (making dtw calls)";
    d << "is " << s.state << "\n";
  }
  d << "    " << recent_locked();
  s.detail = d.str();
  return s;
}

void Watchdog::not_running_locked(Clock::duration lost, Clock::time_point now) {
  // A clock started after the process resumed lost nothing.
  const auto credit = [&](Clock::time_point& t) {
    const Clock::duration d = std::min(lost, now - t);
    t += d;
    return d;
  };
  if (blocked_) stopped_in_block_ += credit(since_);
  if (polling_) credit(poll_since_);
  credit(active_);
}

void Watchdog::send_status_locked(const RankStatus& status) {
  out_.push_back(std::make_unique<std::string>(status.encode()));
  const std::string& text = *out_.back();
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    MPI_Request req = MPI_REQUEST_NULL;
    // Small and buffered (eager): it leaves even if r never calls MPI again.
    if (MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, kStatusTag, channel_,
                  &req) == MPI_SUCCESS)
      MPI_Request_free(&req);
  }
}

void Watchdog::raise_alarm_locked(Clock::time_point now, std::unique_lock<std::mutex>& lock) {
  alarmed_ = true;
  alarm_deadline_ = now + grace(world_);
  RankStatus mine = status_locked(now);
  if (channel_ == MPI_COMM_NULL) {
    // No channel: every rank prints its own part; the pause lets the others print.
    abort_job("dtw mpi watchdog: " + mine.detail.substr(2), lock, milliseconds(1500));
  }
  send_status_locked(mine);
  statuses_[rank_] = std::move(mine);
}

void Watchdog::receive_locked(std::unique_lock<std::mutex>& lock) {
  if (channel_ == MPI_COMM_NULL) return;
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kStatusTag, channel_, &flag, &message, &status) != MPI_SUCCESS ||
        !flag)
      return;
    int n = 0;
    MPI_Get_count(&status, MPI_CHAR, &n);
    std::string text(static_cast<std::size_t>(std::max(n, 0)), '\0');
    MPI_Mrecv(text.data(), n, MPI_CHAR, &message, MPI_STATUS_IGNORE);
    RankStatus s;
    if (!RankStatus::decode(text, s) || s.rank < 0 || s.rank == rank_) continue;
    // Another rank's watchdog fired: answer with this rank's state.
    if (!alarmed_) raise_alarm_locked(Clock::now(), lock);
    statuses_[s.rank] = std::move(s);
  }
}

void Watchdog::silent_notice_locked(double silent_s) {
  std::ostringstream out;
  out << "dtw mpi watchdog: " << who_locked() << " has made no dtw call for " << tenths(silent_s)
      << " s (timeout " << timeout_.count() / 1000.0 << " s): if the job hangs, rank " << rank_
      << " is the silent rank the others wait for (computing, or stuck in its own code)\n  "
      << recent_locked();
  std::fputs(out.str().c_str(), stderr);
  std::fflush(stderr);
}

void Watchdog::abort_job(const std::string& report, std::unique_lock<std::mutex>& lock,
                         std::chrono::milliseconds pause) {
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
  const int rank = rank_;
  lock.unlock();
  std::this_thread::sleep_for(pause);
  std::fprintf(stderr, "dtw mpi watchdog: rank %d aborts the job (exit code %d)\n", rank,
               kWatchdogExitCode);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
  _exit(kWatchdogExitCode);  // MPI_Abort does not return; this is for safety
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  Clock::time_point last = Clock::now();
  while (!stopping_) {
    cv_.wait_for(lock, kTick);
    if (stopping_) break;
    const Clock::time_point now = Clock::now();
    // The heartbeat: a late wake-up means the process did not run.
    if (now - last > kTick + kStall) not_running_locked(now - last - kTick, now);
    last = now;
    receive_locked(lock);
    if (alarmed_) {
      // Every answer in, or the grace period over: the lowest rank that
      // answered prints the job's one report and aborts it.
      const bool all = static_cast<int>(statuses_.size()) >= world_;
      if (!all && now < alarm_deadline_) continue;
      const int printer = statuses_.begin()->first;
      if (printer == rank_) {
        abort_job(job_report(world_, statuses_, timeout_.count()), lock, milliseconds(0));
      } else if (now >= alarm_deadline_ + kFallback) {
        abort_job("dtw mpi watchdog: rank " + std::to_string(printer) +
                      ", which was to print this report and abort the job, has not\n" +
                      job_report(world_, statuses_, timeout_.count()),
                  lock, milliseconds(0));
      }
      continue;
    }
    if (!armed_) continue;
    if ((blocked_ && now - since_ >= timeout_) ||
        (!blocked_ && polling_ && now - poll_since_ >= timeout_)) {
      raise_alarm_locked(now, lock);
      continue;
    }
    // Once per silence: a rank outside every dtw call for the timeout.
    if (!blocked_ && !silence_reported_ && now - active_ >= timeout_) {
      silence_reported_ = true;
      silent_notice_locked(seconds(now - active_));
    }
  }
}

}  // namespace dtw::mpi
