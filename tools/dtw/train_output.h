#pragma once
// What dtw train prints and writes as a run goes (train_output.cpp): the
// progress line, the loss curve (CSV, and SVG through gnuplot) and the time
// per layer type.
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/model/profile.h"
#include "dtw/model/trainer.h"
#include "dtw/train/harness.h"

namespace dtw::cli {

/// "12.3k", "1.20M": tokens per second at a glance.
std::string human_rate(double per_second);

/// One line that rewrites itself on a terminal; on a pipe, a line per tenth
/// of the run (and the first and last step), so logs stay short.
class Progress {
 public:
  /// `unit`: what a step's "tokens" count (tokens for a GPT, rows for an MLP).
  Progress(std::int64_t steps, std::string unit);
  void update(const model::StepInfo& s);
  double seconds() const { return seconds_; }
  std::int64_t tokens() const { return tokens_; }

 private:
  std::int64_t steps_;
  std::string unit_;
  bool tty_;
  std::int64_t tokens_ = 0;
  double seconds_ = 0;
};

/// The loss curve as `step,loss` lines.
void write_csv(const std::string& path, const std::vector<double>& losses);
/// The curve drawn from the CSV by gnuplot; without gnuplot, says why and goes on.
void write_plot(const std::string& csv, const std::string& svg, const std::string& title);
/// Every rank's time per layer type over the run, summed (and a column per
/// rank up to eight ranks), next to the run's wall time.
void print_breakdown(const std::vector<train::RankOutcome>& ranks, double step_seconds);

}  // namespace dtw::cli
