// Human-readable reports of what every rank is waiting for: the deadlock
// detector's wait-for graph, cycles first. The report stays short at any world
// size: every cycle is named, a few ranks are shown in full, and the rest are
// counted by what they are doing.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "dtw/tag_names.h"
#include "threads/describe.h"
#include "threads/threads_world.h"

namespace dtw::threads {
namespace {

constexpr std::size_t kMaxCycles = 8;         // cycles listed; the rest are counted
constexpr std::size_t kMaxCycleHops = 12;     // longer cycles show their ends
constexpr std::size_t kDetailedRanks = 16;    // ranks shown with their pending operations
constexpr std::size_t kOpsPerRank = 4;        // pending operations shown per rank
constexpr std::size_t kMaxDangling = 4;       // "waits for a returned rank" lines

// "ranks 0-5, 7, 9-11": runs of consecutive ranks collapse; long lists end in "...".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  std::size_t runs = 0;
  for (std::size_t i = 0; i < ranks.size(); ++runs) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == 8) return out + fmt::format(", ... ({} more)", ranks.size() - i);
    if (i > 0) out += ", ";
    out += j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]);
    i = j + 1;
  }
  return out;
}

std::string hops(const std::vector<int>& cycle, bool group, const std::vector<int>& group_rank) {
  std::string out;
  const auto hop = [&](std::size_t i) {
    const int r = cycle[i % cycle.size()];
    out += group ? fmt::format("rank {} (world {})", group_rank[r], r) : fmt::format("rank {}", r);
  };
  for (std::size_t i = 0; i <= cycle.size(); ++i) {
    if (cycle.size() > kMaxCycleHops && i == kMaxCycleHops - 3) {
      out += fmt::format("... ({} more) -> ", cycle.size() - kMaxCycleHops + 1);
      i = cycle.size() - 2;
    }
    hop(i);
    if (i < cycle.size()) out += " -> ";
  }
  return out;
}

// True for an operation of a split group whose ranks differ from the world's.
bool in_group(const Op& op) { return op.group_peer != op.peer_world || op.group_owner != op.owner; }

}  // namespace

std::string format_bytes(std::int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1 << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < (std::int64_t{1} << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

std::string describe_tag(const Op& op) {
  if (op.channel) return fmt::format("collective operation {}", op.msg_tag);
  const std::string name = op.msg_tag >= 0 ? tag_name(op.msg_tag) : "";
  return name.empty() ? fmt::format("tag {}", op.msg_tag)
                      : fmt::format("tag {} ({})", op.msg_tag, name);
}

std::string describe(const Op& op) {
  const std::int64_t bytes = op.count * static_cast<std::int64_t>(size_of(op.type));
  // In a split group the peer is named by its rank there (what the code passed)
  // and by its world rank (what the report's rank lines use).
  const std::string peer = in_group(op) ? fmt::format("rank {} of its group (world rank {})",
                                                      op.group_peer, op.peer_world)
                                        : fmt::format("rank {}", op.peer_world);
  return fmt::format("{} {} {}, {}, {} ({} {})", op.call, op.send ? "to" : "from", peer,
                     describe_tag(op), format_bytes(bytes), op.count, name_of(op.type));
}

std::string mismatch_message(const Op& send, const Op& recv, const char* what) {
  return fmt::format(
      "{}: rank {} sends {} {} ({}) with {} but rank {} receives into {} {} ({})", what,
      send.owner, send.count, name_of(send.type),
      format_bytes(send.count * static_cast<std::int64_t>(size_of(send.type))), describe_tag(send),
      recv.owner, recv.count, name_of(recv.type),
      format_bytes(recv.count * static_cast<std::int64_t>(size_of(recv.type))));
}

std::string World::wait_graph(const char* headline) const {
  const Clock::time_point now = Clock::now();
  const auto n = static_cast<std::size_t>(size_);
  std::string out = fmt::format("{} (world of {}, threads backend)\n", headline, size_);

  // The wait-for graph keeps one edge per waiting rank: the peer of its first
  // pending operation that nothing has matched yet (the edge the cycle check
  // follows), else of its first pending one. Each rank then has at most one
  // successor, so the cycles are disjoint and one pass finds every one of them.
  std::vector<int> next(n, -1), group_rank(n, -1);
  std::vector<char> grouped(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    const RankState& s = ranks_[r];
    if (s.finished || !s.waiting || s.waiting_on.empty()) continue;
    const auto unmatched = std::find_if(s.waiting_on.begin(), s.waiting_on.end(), [](const Op* op) {
      return op->state == Op::State::kPosted;
    });
    const Op& first = unmatched != s.waiting_on.end() ? **unmatched : *s.waiting_on.front();
    next[r] = first.peer_world;
    group_rank[r] = first.group_owner;
    grouped[r] = in_group(first);
  }
  std::vector<std::vector<int>> cycles;
  std::vector<int> color(n, 0);  // 0 unseen, 1 on the walk being followed, 2 done
  for (int start = 0; start < size_; ++start) {
    std::vector<int> walk;
    int at = start;
    while (at >= 0 && color[at] == 0) {
      color[at] = 1;
      walk.push_back(at);
      at = next[at];
    }
    if (at >= 0 && color[at] == 1) {
      auto from = std::find(walk.begin(), walk.end(), at);
      std::vector<int> cycle(from, walk.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
      cycles.push_back(std::move(cycle));
    }
    for (int r : walk) color[r] = 2;
  }
  std::sort(cycles.begin(), cycles.end());

  // Cycles first: they are the deadlock. In a split group the hops carry the
  // ranks the code used there as well as the world ranks.
  std::vector<char> shown(n, 0);
  std::size_t detailed = 0;
  std::vector<int> order;  // ranks shown in full, cycle members first
  for (std::size_t c = 0; c < cycles.size(); ++c) {
    const std::vector<int>& cycle = cycles[c];
    const bool group = std::any_of(cycle.begin(), cycle.end(), [&](int r) { return grouped[r]; });
    if (c < kMaxCycles) {
      out += fmt::format("  cycle{}: {}\n",
                         cycle.size() > kMaxCycleHops ? fmt::format(" of {} ranks", cycle.size()) : "",
                         hops(cycle, group, group_rank));
    } else if (c == kMaxCycles) {
      out += fmt::format("  ... and {} more cycle(s)\n", cycles.size() - kMaxCycles);
    }
    for (int r : cycle) order.push_back(r);
  }
  if (cycles.size() > 1) out += fmt::format("  ({} disjoint cycles)\n", cycles.size());
  // Without a cycle, the ranks that wait for one that has returned explain the hang.
  std::size_t dangling = 0;
  for (int r = 0; r < size_; ++r) {
    if (next[r] < 0 || !ranks_[next[r]].finished) continue;
    if (dangling < kMaxDangling && cycles.empty())
      out += fmt::format("  no cycle: rank {} waits for rank {}, which has returned\n", r, next[r]);
    if (++dangling <= kMaxDangling) order.push_back(r);
  }
  if (cycles.empty() && dangling > kMaxDangling)
    out += fmt::format("  ... and {} more rank(s) wait for a rank that has returned\n",
                       dangling - kMaxDangling);
  for (int r = 0; r < size_; ++r) order.push_back(r);

  // The ranks in full: what each waits for, since when.
  std::map<std::string, std::vector<int>> rest;  // state -> ranks, for the others
  for (int r : order) {
    const RankState& s = ranks_[static_cast<std::size_t>(r)];
    if (shown[r]) continue;
    shown[r] = 1;
    std::string state;
    if (s.finished) state = "finished";
    else if (!s.waiting && s.polled) state = fmt::format("running, polling with {}", s.call);
    else if (!s.waiting) state = "running";
    else state = fmt::format("in {}", s.call);
    if (detailed >= kDetailedRanks) {
      rest[state].push_back(r);
      continue;
    }
    ++detailed;
    if (s.finished || (!s.waiting && !s.polled)) {
      out += fmt::format("  rank {:>3}  {}\n", r, state);
      continue;
    }
    if (!s.waiting) {
      const double ms = std::chrono::duration<double, std::milli>(now - s.polling_since).count();
      out += fmt::format("  rank {:>3}  {} for {:.1f} ms: {}\n", r, state, ms, describe(*s.polled.load()));
      continue;
    }
    const double ms = std::chrono::duration<double, std::milli>(now - s.since).count();
    // wait_any needs one of its operations, a full wait every one of them.
    out += fmt::format("  rank {:>3}  {}, waiting {:.1f} ms for{}:\n", r, state, ms,
                       s.any && s.waiting_on.size() > 1 ? " any one of" : "");
    for (std::size_t i = 0; i < s.waiting_on.size() && i < kOpsPerRank; ++i)
      out += fmt::format("              {}\n", describe(*s.waiting_on[i]));
    if (s.waiting_on.size() > kOpsPerRank)
      out += fmt::format("              ... and {} more\n", s.waiting_on.size() - kOpsPerRank);
  }
  if (!rest.empty()) {
    std::size_t others = 0;
    for (const auto& [state, ranks] : rest) others += ranks.size();
    out += fmt::format("  the other {} rank(s):\n", others);
    for (auto& [state, ranks] : rest) {
      std::sort(ranks.begin(), ranks.end());
      out += fmt::format("    {:>5} {}: {}\n", ranks.size(), state, rank_list(ranks));
    }
  }
  return out;
}

}  // namespace dtw::threads
