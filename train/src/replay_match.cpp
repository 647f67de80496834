// The replay's matching: which receive each send meets, and on a device which
// messages are the rounds of one collective and which stream runs them.
#include <algorithm>
#include <map>
#include <tuple>

#include "replay.h"

namespace dtw::train::replay {

std::vector<Message> pair_messages(const std::vector<TraceEvent>& events) {
  const std::size_t n = events.size();
  std::map<std::tuple<int, int, int, bool>, std::vector<std::size_t>> sends, recvs;
  for (std::size_t i = 0; i < n; ++i) {
    const TraceEvent& e = events[i];
    if (e.category != "comm") continue;
    const bool collective = e.channel >= 0;
    if (e.is_send) sends[{e.rank, e.peer, e.tag, collective}].push_back(i);
    else recvs[{e.peer, e.rank, e.tag, collective}].push_back(i);
  }
  std::vector<Message> msg(n);
  auto by_post = [&](std::size_t a, std::size_t b) { return events[a].start_us < events[b].start_us; };
  for (auto& [key, s] : sends) {
    std::vector<std::size_t>& r = recvs[key];
    std::sort(s.begin(), s.end(), by_post);
    std::sort(r.begin(), r.end(), by_post);
    // The k-th send of a (source, destination, tag) meets its k-th receive,
    // as every dtw backend matches them.
    for (std::size_t k = 0; k < std::min(s.size(), r.size()); ++k) {
      msg[s[k]] = {-1, r[k], true};
      msg[r[k]] = {-1, s[k], true};
    }
  }
  return msg;
}

Collectives group_collectives(const std::vector<TraceEvent>& events, bool device) {
  const std::size_t n = events.size();
  Collectives out;
  out.group.assign(n, -1);
  if (!device) return out;
  std::map<std::tuple<int, int, int>, int> groups;
  std::map<std::pair<int, int>, std::size_t> lane_of;
  std::vector<std::size_t> by_time(n);
  for (std::size_t i = 0; i < n; ++i) by_time[i] = i;
  std::stable_sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) {
    return events[a].start_us < events[b].start_us;
  });
  std::vector<std::vector<int>> lane_groups;
  for (std::size_t i : by_time) {
    const TraceEvent& e = events[i];
    if (e.category != "comm" || e.channel < 0 || e.tag < 0) continue;
    const auto [it, made] =
        groups.try_emplace({e.rank, e.channel, e.tag}, static_cast<int>(out.members.size()));
    if (made) {
      out.members.emplace_back();
      const auto [lane, new_lane] = lane_of.try_emplace({e.rank, e.channel}, lane_groups.size());
      if (new_lane) lane_groups.emplace_back();
      lane_groups[lane->second].push_back(it->second);
    }
    out.group[i] = it->second;
    out.members[static_cast<std::size_t>(it->second)].push_back(i);
  }
  for (const std::vector<int>& gs : lane_groups) {
    out.lanes.emplace_back();
    for (int g : gs) {
      const std::vector<std::size_t>& m = out.members[static_cast<std::size_t>(g)];
      out.lanes.back().insert(out.lanes.back().end(), m.begin(), m.end());
    }
  }
  // A later round waits for the rounds of its collective that had ended on
  // the host by its start: the rounds by host end let the worklist walk that
  // set once (rounds are posted in order of start, so it only grows).
  out.by_end = out.members;
  for (auto& rounds : out.by_end)
    std::stable_sort(rounds.begin(), rounds.end(), [&](std::size_t a, std::size_t b) {
      return events[a].end_us < events[b].end_us;
    });
  return out;
}

}  // namespace dtw::train::replay
