#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

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

// "least 8 B (rank 1023), median 16 B, most 1.0 KiB (rank 0)" over per-rank totals.
std::string spread(const std::vector<std::int64_t>& per_rank) {
  std::vector<std::int64_t> sorted = per_rank;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  const auto least = std::min_element(per_rank.begin(), per_rank.end());
  const auto most = std::max_element(per_rank.begin(), per_rank.end());
  return fmt::format("least {} (rank {}), median {}, most {} (rank {})", format_bytes(*least),
                     least - per_rank.begin(), format_bytes(sorted[sorted.size() / 2]),
                     format_bytes(*most), most - per_rank.begin());
}

constexpr int kTopLinks = 8;
// Worlds larger than this print summaries instead of one row (or column) per rank.
constexpr int kTableRanks = 16;
}  // namespace

std::string Report::traffic_table() const {
  constexpr int max_ranks = kTableRanks;
  const auto p = static_cast<std::size_t>(world_size);
  if (world_size <= max_ranks) {
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
  // Too many ranks for a matrix: totals, the spread over ranks, the busiest links.
  std::vector<std::int64_t> sent(p, 0), received(p, 0);
  std::int64_t links = 0, total = 0, count = 0;
  using Link = std::tuple<std::int64_t, int, int>;  // bytes, src, dst
  std::priority_queue<Link, std::vector<Link>, std::greater<>> top;  // the smallest on top
  for (std::size_t s = 0; s < p; ++s) {
    for (std::size_t d = 0; d < p; ++d) {
      const std::int64_t b = bytes[s][d];
      if (messages.size() == p) count += messages[s][d];
      if (b == 0) continue;
      ++links;
      total += b;
      sent[s] += b;
      received[d] += b;
      top.emplace(b, static_cast<int>(s), static_cast<int>(d));
      if (top.size() > kTopLinks) top.pop();
    }
  }
  std::string out = fmt::format(
      "  {} ranks: {} in {} messages over {} of {} links (a matrix is shown up to {} ranks)\n",
      world_size, format_bytes(total), count, links, world_size * (world_size - 1), max_ranks);
  out += fmt::format("  sent per rank:     {}\n", spread(sent));
  out += fmt::format("  received per rank: {}\n", spread(received));
  std::vector<Link> busiest;
  for (; !top.empty(); top.pop()) busiest.push_back(top.top());
  std::reverse(busiest.begin(), busiest.end());
  if (!busiest.empty()) out += "  busiest links (from -> to):\n";
  for (const auto& [b, s, d] : busiest)
    out += fmt::format("    {:>5} -> {:<5} {:>10}  {} message(s)\n", s, d, format_bytes(b),
                       messages.size() == p ? messages[s][d] : 0);
  return out;
}

std::string Report::memory_table() const {
  constexpr int max_ranks = kTableRanks;
  // Peaks per category: what a rank needed of each kind at its worst moment.
  // "peak total" is the worst moment overall (at most the sum of the peaks).
  std::string out = fmt::format("{:>5}", "rank");
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    out += fmt::format("{:>16}", name_of(static_cast<MemoryCategory>(c)));
  out += fmt::format("{:>12}{:>12}{:>12}\n", "peak total", "at end", "cap");
  const auto row = [&](const MemorySnapshot& m) {
    out += fmt::format("{:>5}", m.rank);
    for (std::size_t c = 0; c < kMemoryCategories; ++c)
      out += fmt::format("{:>16}", m.peak[c] ? format_bytes(m.peak[c]) : std::string("."));
    out += fmt::format("{:>12}{:>12}{:>12}\n", format_bytes(m.peak_total),
                       format_bytes(m.current_total()),
                       m.cap ? format_bytes(m.cap) : std::string("none"));
  };
  const auto shown = static_cast<std::size_t>(std::max(max_ranks - 1, 1));
  if (memory.size() <= static_cast<std::size_t>(std::max(max_ranks, 1))) {
    for (const MemorySnapshot& m : memory) row(m);
    return out;
  }
  // The first ranks, then the rank at the largest peak, then a count of the rest.
  for (std::size_t i = 0; i < shown; ++i) row(memory[i]);
  const auto worst = std::max_element(memory.begin() + static_cast<std::ptrdiff_t>(shown), memory.end(),
                                      [](const MemorySnapshot& a, const MemorySnapshot& b) {
                                        return a.peak_total < b.peak_total;
                                      });
  out += fmt::format("  ... {} more rank(s); the largest peak among them:\n", memory.size() - shown);
  row(*worst);
  return out;
}

void Report::write_trace(const std::string& path) const {
  DTW_CHECK(!trace.empty(), InvalidArgument,
            "write_trace: the launch recorded no trace (set LaunchOptions::trace)");
  write_chrome_trace(trace, path);
}

}  // namespace dtw
