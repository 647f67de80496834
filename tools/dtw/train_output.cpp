// dtw train's output as a run goes (train_output.h).
#include "train_output.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "bench_main.h"
#include "dtw/output_file.h"
#include "mpi_launch.h"
#include "process.h"
#include "style.h"

namespace dtw::cli {

std::string human_rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

Progress::Progress(std::int64_t steps, std::string unit)
    : steps_(steps),
      unit_(std::move(unit)),
      // Under mpirun rank 0's stdout is a terminal of mpirun's even when
      // dtw's is a pipe; dtw then passes NO_COLOR (mpi_launch.cpp).
      tty_(isatty(STDOUT_FILENO) == 1 && (!inside_mpirun() || color_enabled())) {}

void Progress::update(const model::StepInfo& s) {
  tokens_ += s.tokens;
  seconds_ += s.seconds;
  const double rate = seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0;
  const double eta = s.step + 1 < steps_ ? seconds_ / static_cast<double>(s.step + 1) *
                                               static_cast<double>(steps_ - s.step - 1)
                                         : 0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * (s.step + 1) / std::max<std::int64_t>(steps_, 1));
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kWidth - filled), '.');
  const std::string norm =
      std::isfinite(s.grad_norm) ? fmt::format("  |g| {:.3f}", s.grad_norm) : std::string();
  const std::string line =
      fmt::format("step {:>{}}/{} [{}] loss {:.4f}{}  {} {}/s  {}", s.step + 1,
                  std::to_string(steps_).size(), steps_, bar, s.loss, norm, human_rate(rate),
                  unit_, eta > 0 ? "eta " + human_seconds(eta) : std::string("done"));
  if (tty_) {
    fmt::print("\r\033[K{}", line);
    if (s.step + 1 == steps_) fmt::print("\n");
    std::fflush(stdout);
  } else if (s.step == 0 || s.step + 1 == steps_ ||
             (s.step + 1) % std::max<std::int64_t>(steps_ / 10, 1) == 0) {
    fmt::print("{}\n", line);
  }
}

void write_csv(const std::string& path, const std::vector<double>& losses) {
  std::ostringstream out;
  out << "step,loss\n";
  for (std::size_t i = 0; i < losses.size(); ++i) out << i + 1 << "," << losses[i] << "\n";
  write_file(path, out.str(), "dtw train: the loss curve");
}

// gnuplot draws the CSV; without gnuplot the CSV alone is still useful. It
// runs like every child process (process.h): no shell, its failure decoded.
void write_plot(const std::string& csv, const std::string& svg, const std::string& title) {
  // The plot is an extra next to the CSV: without it, say why and keep going.
  if (draw_with_gnuplot({"-e", fmt::format("datafile='{}'; outfile='{}'; plottitle='{}'", csv, svg, title),
                         DTW_LOSS_PLOT_SCRIPT}))
    fmt::print("wrote {} (the loss curve)\n", svg);
}

void print_breakdown(const std::vector<train::RankOutcome>& ranks, double step_seconds) {
  // Every rank's kinds, summed: a pipeline's stages run different layers
  // (rank 0 the embedding, the last the loss), so one rank's table is a part.
  struct Row {
    std::string kind;
    double seconds = 0, flops = 0;
    std::int64_t calls = 0;
    std::vector<double> by_rank;
  };
  std::vector<Row> rows;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const model::LayerTimes::Entry& e : ranks[r].layer_times) {
      auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& x) { return x.kind == e.kind; });
      if (it == rows.end()) {
        rows.push_back({e.kind, 0, 0, 0, std::vector<double>(ranks.size(), 0.0)});
        it = rows.end() - 1;
      }
      it->seconds += e.seconds;
      it->flops += e.flops;
      it->calls += e.calls;
      it->by_rank[r] += e.seconds;
    }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  // A column per rank up to this many; beyond, the sum alone.
  constexpr std::size_t kRankColumns = 8;
  const bool per_rank = ranks.size() > 1 && ranks.size() <= kRankColumns;
  fmt::print("\n{}\n", paint(Paint::kBold, ranks.size() > 1
                                                ? fmt::format("time per layer type (all {} ranks, all "
                                                              "steps, forward + backward)",
                                                              ranks.size())
                                                : std::string("time per layer type (all steps, "
                                                              "forward + backward)")));
  std::string head = fmt::format("  {:<11} {:>10} {:>7} {:>9} {:>9}", "layer", "time", "share",
                                 "calls", "GFLOP/s");
  if (per_rank)
    for (std::size_t r = 0; r < ranks.size(); ++r) head += fmt::format(" {:>9}", fmt::format("rank {}", r));
  fmt::print("{}\n", head);
  double total = 0;
  std::vector<double> rank_total(ranks.size(), 0.0);
  for (const Row& row : rows) {
    total += row.seconds;
    for (std::size_t r = 0; r < ranks.size(); ++r) rank_total[r] += row.by_rank[r];
  }
  for (const Row& row : rows) {
    const std::string rate = row.flops > 0 && row.seconds > 0
                                 ? fmt::format("{:.1f}", row.flops / row.seconds / 1e9)
                                 : std::string("");
    std::string line = fmt::format("  {:<11} {:>10} {:>6.1f}% {:>9} {:>9}", row.kind,
                                   human_seconds(row.seconds),
                                   total > 0 ? 100 * row.seconds / total : 0.0, row.calls, rate);
    if (per_rank)
      for (double t : row.by_rank) line += fmt::format(" {:>9}", t > 0 ? human_seconds(t) : "-");
    fmt::print("{}\n", line);
  }
  std::string sum = fmt::format("  {:<11} {:>10} {:>7} {:>9} {:>9}", "sum", human_seconds(total), "",
                                "", "");
  if (per_rank)
    for (double t : rank_total) sum += fmt::format(" {:>9}", human_seconds(t));
  fmt::print("{}\n", sum);
  fmt::print("  (measured layers, summed over the ranks; the whole run took {} of wall time)\n",
             human_seconds(step_seconds));
}

}  // namespace dtw::cli
