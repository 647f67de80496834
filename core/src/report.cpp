#include <fmt/format.h>

#include "dtw/errors.h"
#include "dtw/launch.h"

namespace dtw {

std::int64_t Report::total_bytes() const {
  std::int64_t total = 0;
  for (const auto& row : bytes)
    for (std::int64_t b : row) total += b;
  return total;
}

namespace {
std::string human(std::int64_t b) {
  if (b < 1024) return fmt::format("{}", b);
  if (b < (1 << 20)) return fmt::format("{:.1f}K", b / 1024.0);
  if (b < (std::int64_t{1} << 30)) return fmt::format("{:.1f}M", b / 1048576.0);
  return fmt::format("{:.1f}G", b / 1073741824.0);
}
}  // namespace

std::string Report::traffic_table() const {
  // Rows are senders, columns receivers; the last column is the row's total.
  std::string out = fmt::format("{:>8}", "src\\dst");
  for (int d = 0; d < world_size; ++d) out += fmt::format("{:>8}", d);
  out += fmt::format("{:>9}\n", "sent");
  for (int s = 0; s < world_size; ++s) {
    out += fmt::format("{:>8}", s);
    std::int64_t row = 0;
    for (int d = 0; d < world_size; ++d) {
      out += fmt::format("{:>8}", bytes[s][d] ? human(bytes[s][d]) : std::string("."));
      row += bytes[s][d];
    }
    out += fmt::format("{:>9}\n", human(row));
  }
  return out;
}

std::string Report::memory_table() const {
  // Peaks per category: what a rank needed of each kind at its worst moment.
  // "peak total" is the worst moment overall (at most the sum of the peaks).
  std::string out = fmt::format("{:>5}", "rank");
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    out += fmt::format("{:>16}", name_of(static_cast<MemoryCategory>(c)));
  out += fmt::format("{:>12}{:>12}{:>12}\n", "peak total", "at end", "cap");
  for (const MemorySnapshot& m : memory) {
    out += fmt::format("{:>5}", m.rank);
    for (std::size_t c = 0; c < kMemoryCategories; ++c)
      out += fmt::format("{:>16}", m.peak[c] ? format_bytes(m.peak[c]) : std::string("."));
    out += fmt::format("{:>12}{:>12}{:>12}\n", format_bytes(m.peak_total),
                       format_bytes(m.current_total()),
                       m.cap ? format_bytes(m.cap) : std::string("none"));
  }
  return out;
}

void Report::write_trace(const std::string& path) const {
  DTW_CHECK(!trace.empty(), InvalidArgument,
            "write_trace: the launch recorded no trace (set LaunchOptions::trace)");
  write_chrome_trace(trace, path);
}

}  // namespace dtw
