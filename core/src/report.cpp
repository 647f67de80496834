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

void Report::write_trace(const std::string& path) const {
  DTW_CHECK(!trace.empty(), InvalidArgument,
            "write_trace: the launch recorded no trace (set LaunchOptions::trace)");
  write_chrome_trace(trace, path);
}

}  // namespace dtw
