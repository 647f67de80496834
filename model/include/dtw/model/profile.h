#pragma once
/// @file
/// Where a training step spends its time, by kind of layer.
///
/// The model code wraps each kernel call in a ScopedLayerTimer; with a
/// LayerTimes attached, a step's time splits into "matmul", "attention" (scores,
/// mask, softmax and the head permutes, including attention's own products),
/// "layernorm", "gelu", "bias", "embedding", "residual", "loss" and
/// "optimizer". Without one (a null pointer) the timers do nothing.
/// A LayerTimes belongs to one rank thread: it is not synchronised.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtw::model {

/// Accumulated wall time (and floating-point work) per kind of layer.
class LayerTimes {
 public:
  /// Totals for one kind.
  struct Entry {
    std::string kind;   ///< e.g. "matmul", "layernorm" (see the file comment)
    double seconds = 0;  ///< total wall time of all calls
    double flops = 0;  ///< floating-point operations counted (0 where not counted)
    std::int64_t calls = 0;  ///< number of timed calls
  };

  /// Adds one call of `kind` that took `seconds` and did `flops` operations.
  void add(std::string_view kind, double seconds, double flops = 0);
  /// Every kind seen, most time first.
  std::vector<Entry> entries() const;
  /// The sum of all kinds' seconds.
  double total_seconds() const;
  /// Seconds of one kind (0 if never seen).
  double seconds(std::string_view kind) const;
  /// Forgets everything (but flops_added()).
  void clear() { entries_.clear(); }
  /// Every FLOP added since construction, clear() or not: a clock of the
  /// work done, which the trace records at each event (Tracer::set_work_clock).
  double flops_added() const { return flops_added_; }

 private:
  std::vector<Entry> entries_;  // a handful of kinds: a linear search is fastest
  double flops_added_ = 0;
};

/// Times its own lifetime into `times` under `kind` (nothing when times is null).
class ScopedLayerTimer {
 public:
  /// Starts the clock; `kind` must outlive the timer (a string literal), and
  /// `flops` is the work credited to it on destruction.
  ScopedLayerTimer(LayerTimes* times, std::string_view kind, double flops = 0)
      : times_(times), kind_(kind), flops_(flops) {
    if (times_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedLayerTimer() {
    if (times_ == nullptr) return;
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    times_->add(kind_, elapsed.count(), flops_);
  }
  ScopedLayerTimer(const ScopedLayerTimer&) = delete;
  ScopedLayerTimer& operator=(const ScopedLayerTimer&) = delete;

 private:
  LayerTimes* times_;
  std::string_view kind_;  // callers pass string literals
  double flops_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dtw::model
