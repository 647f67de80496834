#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "dtw/errors.h"
#include "dtw/launch.h"

namespace dtw {

std::int64_t Report::total_bytes() const {
  return traffic.total_bytes();
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
  // A Report made by hand may leave `traffic` empty (a world of 0 ranks).
  DTW_CHECK_ARG(traffic.world_size() == world_size || traffic.links().empty(),
                "traffic_table: the report is of " << world_size << " ranks but its traffic of "
                                                   << traffic.world_size());
  const auto bytes = [&](int s, int d) {
    return traffic.world_size() == world_size ? traffic.bytes(s, d) : 0;
  };
  if (world_size <= max_ranks) {
    // Rows are senders, columns receivers; the last column is the row's total.
    std::string out = fmt::format("{:>8}", "src\\dst");
    for (int d = 0; d < world_size; ++d) out += fmt::format("{:>8}", d);
    out += fmt::format("{:>9}\n", "sent");
    for (int s = 0; s < world_size; ++s) {
      out += fmt::format("{:>8}", s);
      std::int64_t row = 0;
      for (int d = 0; d < world_size; ++d) {
        const std::int64_t b = bytes(s, d);
        out += fmt::format("{:>8}", b ? human(b) : std::string("."));
        row += b;
      }
      out += fmt::format("{:>9}\n", human(row));
    }
    return out;
  }
  // Too many ranks for a matrix: totals, the spread over ranks, the busiest
  // links; one pass over the links used, never over p² cells.
  std::vector<std::int64_t> sent(p, 0), received(p, 0);
  std::int64_t links = 0, total = 0, count = 0;
  using Busy = std::tuple<std::int64_t, int, int, std::int64_t>;     // bytes, src, dst, messages
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> top;  // the smallest on top
  for (const Link& l : traffic.links()) {
    count += l.messages;
    if (l.bytes == 0) continue;
    ++links;
    total += l.bytes;
    sent[static_cast<std::size_t>(l.src)] += l.bytes;
    received[static_cast<std::size_t>(l.dst)] += l.bytes;
    top.emplace(l.bytes, l.src, l.dst, l.messages);
    if (top.size() > kTopLinks) top.pop();
  }
  std::string out = fmt::format(
      "  {} ranks: {} in {} messages over {} of {} links (a matrix is shown up to {} ranks)\n",
      world_size, format_bytes(total), count, links, world_size * (world_size - 1), max_ranks);
  out += fmt::format("  sent per rank:     {}\n", spread(sent));
  out += fmt::format("  received per rank: {}\n", spread(received));
  std::vector<Busy> busiest;
  for (; !top.empty(); top.pop()) busiest.push_back(top.top());
  std::reverse(busiest.begin(), busiest.end());
  if (!busiest.empty()) out += "  busiest links (from -> to):\n";
  for (const auto& [b, s, d, m] : busiest)
    out += fmt::format("    {:>5} -> {:<5} {:>10}  {} message(s)\n", s, d, format_bytes(b), m);
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
