#pragma once
/// @file
/// Trace events in the Chrome trace format (open the file in Perfetto or chrome://tracing).

#include <chrono>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

namespace dtw {

/// One complete event: a communication call or a named phase of chapter code.
struct TraceEvent {
  std::string name;      ///< "send", "recv", "barrier", or a phase name ("forward")
  /// "comm" for communication calls, "compute" for phases that compute (the
  /// timeline and the modeled fabric count them), "phase" for other phases.
  std::string category;
  int rank = 0;          ///< world rank
  int peer = -1;         ///< world rank of the peer, -1 when none
  /// Payload bytes of a communication call; for a compute phase, the memory
  /// traffic of its element-wise work (what a device's bandwidth limits).
  std::int64_t bytes = 0;
  /// Message tag of a communication call.
  int tag = 0;
  double start_us = 0;   ///< microseconds since the launch started
  /// Microseconds since the launch started, when the call returned.
  double end_us = 0;
  /// A communication call: true for the sending side (send, isend, the send
  /// half of a sendrecv), false for a receive.
  bool is_send = false;
  int stage = -1;        ///< pipeline stage of a phase, −1 when none
  int micro_batch = -1;  ///< micro-batch of a phase, −1 when none
  double flops = 0;      ///< floating-point work of a compute phase (matrix products)
  /// A message of a collective channel (Comm::collective_channel()): which of
  /// this rank's channels, numbered 0, 1, ... in the order the rank made them;
  /// −1 for a message of a user communicator. With `tag` (the collective's
  /// number on that channel) it names the collective a message belongs to.
  int channel = -1;
  /// The rank's work clock (Tracer::set_work_clock: FLOPs computed so far)
  /// when the event started and when it ended; −1 without a work clock. The
  /// modeled fabric places a call made inside a compute phase by the share of
  /// the phase's work done before it.
  double work_start = -1;
  double work_end = -1;  ///< the work clock when the event ended; −1 without one
};

/// What a phase is, for the timeline and the modeled fabric.
struct PhaseMeta {
  bool compute = false;  ///< a compute phase (category "compute") rather than a label
  int stage = -1;        ///< pipeline stage, −1 when none
  int micro_batch = -1;  ///< micro-batch, −1 when none
  double flops = 0;      ///< matrix-product FLOPs
  double bytes = 0;      ///< memory traffic of the element-wise rest
};

/// Records one rank's events. Disabled tracers cost one branch per call.
class Tracer {
 public:
  /// The clock events are timed with.
  using Clock = std::chrono::steady_clock;
  /// A tracer for world rank `rank`; times count from `epoch`, the launch's start.
  Tracer(int rank, bool enabled, Clock::time_point epoch)
      : rank_(rank), enabled_(enabled), epoch_(epoch) {}

  /// True when events are recorded.
  bool enabled() const { return enabled_; }
  /// Microseconds since the launch started.
  double now_us() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - epoch_).count();
  }
  /// Appends a communication event (no-op when disabled); `channel` and
  /// `start_work` as TraceEvent's `channel` and `work_start`.
  void comm_event(const char* op, int peer, std::int64_t bytes, int tag, double start_us,
                  bool is_send = false, int channel = -1, double start_work = -1);
  /// Installs the rank's work clock: the compute work (FLOPs) done so far,
  /// which every later event records at its start and end (TraceEvent's
  /// work_start, work_end), replacing any other. `owner` names who installed
  /// it, for clear_work_clock. The training layer's RankRun installs one that
  /// counts the model's layers.
  void set_work_clock(std::function<double()> clock, const void* owner = nullptr) {
    work_clock_ = std::move(clock);
    work_owner_ = owner;
  }
  /// Removes the work clock if `owner` installed it (a clock installed since
  /// by someone else stays).
  void clear_work_clock(const void* owner) {
    if (work_owner_ != owner) return;
    work_clock_ = {};
    work_owner_ = nullptr;
  }
  /// The work clock's reading, −1 without one.
  double work() const { return work_clock_ ? work_clock_() : -1; }
  /// The number of this rank's next collective channel (TraceEvent::channel).
  int new_channel() { return channels_++; }
  /// The events recorded so far.
  const std::vector<TraceEvent>& events() const { return events_; }

  /// RAII marker of a named phase: `auto p = comm.tracer().phase("backward");`
  class Phase {
   public:
    /// Starts the phase `name` now; it ends when this object is destroyed.
    Phase(Tracer& tracer, std::string name, const PhaseMeta& meta = {});
    ~Phase();
    Phase(const Phase&) = delete;
    Phase& operator=(const Phase&) = delete;

   private:
    Tracer& tracer_;
    std::string name_;
    PhaseMeta meta_;
    double start_us_;
    double start_work_;
  };
  /// Starts a named phase that lasts as long as the returned object.
  [[nodiscard]] Phase phase(std::string name, const PhaseMeta& meta = {}) {
    return Phase(*this, std::move(name), meta);
  }

 private:
  int rank_;
  bool enabled_;
  Clock::time_point epoch_;
  std::vector<TraceEvent> events_;
  int channels_ = 0;
  std::function<double()> work_clock_;
  const void* work_owner_ = nullptr;
};

/// Writes `events` as Chrome trace JSON (one track per rank) to `path`.
void write_chrome_trace(const std::vector<TraceEvent>& events, const std::string& path);

}  // namespace dtw
