// Human-readable reports of what every rank is waiting for: the deadlock
// detector's wait-for graph, with the cycle that closes it.
#include <fmt/format.h>

#include <set>

#include "dtw/tag_names.h"
#include "threads/describe.h"
#include "threads/threads_world.h"

namespace dtw::threads {

std::string describe_tag(const Op& op) {
  if (op.channel) return fmt::format("collective operation {}", op.msg_tag);
  const std::string name = op.msg_tag >= 0 ? tag_name(op.msg_tag) : "";
  return name.empty() ? fmt::format("tag {}", op.msg_tag)
                      : fmt::format("tag {} ({})", op.msg_tag, name);
}

std::string describe(const Op& op) {
  const std::int64_t bytes = op.count * static_cast<std::int64_t>(size_of(op.type));
  return fmt::format("{} {} rank {}, {}, {} ({} {})", op.call, op.send ? "to" : "from",
                     op.peer_world, describe_tag(op), format_bytes(bytes), op.count,
                     name_of(op.type));
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
  std::string out = fmt::format("{} (world of {}, threads backend)\n", headline, size_);
  // Edges of the wait-for graph: rank -> the peers its pending operations need.
  std::vector<std::vector<int>> edges(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const RankState& s = ranks_[r];
    if (s.finished) {
      out += fmt::format("  rank {:>3}  finished\n", r);
      continue;
    }
    if (!s.waiting && s.polled) {
      const double ms = std::chrono::duration<double, std::milli>(now - s.polling_since).count();
      out += fmt::format("  rank {:>3}  running, polling with {} for {:.1f} ms: {}\n", r, s.call, ms,
                         describe(*s.polled));
      continue;
    }
    if (!s.waiting) {
      out += fmt::format("  rank {:>3}  running\n", r);
      continue;
    }
    const double ms = std::chrono::duration<double, std::milli>(now - s.since).count();
    // wait_any needs one of its operations, a full wait every one of them.
    out += fmt::format("  rank {:>3}  in {}, waiting {:.1f} ms for{}:\n", r, s.call, ms,
                       s.any && s.waiting_on.size() > 1 ? " any one of" : "");
    for (const Op* op : s.waiting_on) {
      out += fmt::format("              {}\n", describe(*op));
      edges[r].push_back(op->peer_world);
    }
  }
  // Follow edges from each waiting rank until a rank repeats: that is a cycle.
  for (int start = 0; start < size_; ++start) {
    std::vector<int> path{start};
    std::set<int> seen{start};
    int at = start;
    while (!edges[at].empty()) {
      const int next = edges[at].front();
      if (next == start) {
        out += "  cycle:";
        for (int r : path) out += fmt::format(" rank {} ->", r);
        out += fmt::format(" rank {}\n", start);
        return out;
      }
      if (!seen.insert(next).second) break;
      path.push_back(next);
      at = next;
    }
  }
  for (int r = 0; r < size_; ++r)
    for (int peer : edges[r])
      if (ranks_[peer].finished)
        return out + fmt::format("  no cycle: rank {} waits for rank {}, which has returned\n", r, peer);
  return out;
}

}  // namespace dtw::threads
