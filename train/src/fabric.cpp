// The modeled fabric: the replay of a trace on a cluster (the named clusters
// are in clusters.cpp).
#include "dtw/train/fabric.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "dtw/errors.h"
#include "replay_work.h"

namespace dtw::train {

namespace {

std::atomic<std::int64_t> g_replay_looks{0};

// At equal times: a phase ends, then a call completes (or is seen complete
// inside a phase), then the next is posted, then a phase starts (calls of one
// rank follow each other).
enum Kind { kEnd = 0, kWait = 1, kSeen = 2, kPost = 3, kStart = 4 };

struct Instant {
  double time;
  Kind kind;
  std::size_t event;  // index into the replay's events
  int phase = -1;     // the compute phase a post lies in (its fraction), or −1
  bool operator<(const Instant& o) const {
    if (time != o.time) return time < o.time;
    if (event == o.event) return step_of(kind) < step_of(o.kind);  // start, post, seen, wait, end
    return std::tie(kind, event) < std::tie(o.kind, o.event);
  }
  static int step_of(Kind k) {
    return k == kStart ? 0 : k == kPost ? 1 : k == kSeen ? 2 : k == kWait ? 3 : 4;
  }
};

struct Message {
  double post = -1;         // modeled post time, −1 until posted
  std::size_t partner = 0;  // index of the other half
  bool matched = false;
};

// Where in compute phase `c` the call `e` was posted, as a share of the
// phase: on a device model, of its work (the work clock's FLOPs) when the
// trace has a work clock that moved during the phase, because a device's time
// is its work and this machine's forward and backward need not take the same
// shares of a step as a GPU's; else (this-machine, or no work clock) of its
// measured time.
double share_before(const TraceEvent& e, const TraceEvent& c, bool by_work) {
  if (by_work && c.work_start >= 0 && c.work_end > c.work_start && e.work_start >= 0)
    return std::clamp((e.work_start - c.work_start) / (c.work_end - c.work_start), 0.0, 1.0);
  return (e.start_us - c.start_us) / (c.end_us - c.start_us);
}

}  // namespace

std::int64_t replay_looks() { return g_replay_looks.load(); }

Replay replay_on(const std::vector<TraceEvent>& trace, int world, const Cluster& cluster) {
  DTW_CHECK_ARG(world >= 1, "replay_on: world " << world << " must be at least 1");
  Replay out;
  // The events that take time: compute phases (outermost only) and messages.
  std::vector<std::vector<std::size_t>> computes(static_cast<std::size_t>(world));
  std::vector<std::vector<std::size_t>> comms(static_cast<std::size_t>(world));
  for (const TraceEvent& e : trace) {
    if (e.category != "compute" && (e.category != "comm" || e.peer < 0)) continue;
    DTW_CHECK_ARG(e.rank >= 0 && e.rank < world,
                  "replay_on: an event of rank " << e.rank << " in a world of " << world);
    out.events.push_back(e);
  }
  const std::size_t n = out.events.size();
  std::vector<double> duration(n, 0);  // modeled seconds of compute phases
  std::vector<bool> dropped(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const TraceEvent& e = out.events[i];
    if (e.category != "compute") {
      comms[static_cast<std::size_t>(e.rank)].push_back(i);
      continue;
    }
    computes[static_cast<std::size_t>(e.rank)].push_back(i);
    if (cluster.measured_compute) {
      duration[i] = (e.end_us - e.start_us) * 1e-6;
    } else {
      if (e.flops <= 0 && e.bytes <= 0) ++out.unmodeled;
      duration[i] = (e.flops > 0 ? e.flops / cluster.flops : 0) +
                    (e.bytes > 0 ? static_cast<double>(e.bytes) / cluster.memory_bw : 0);
    }
  }
  // A compute phase inside another of the same rank is part of it.
  for (auto& list : computes) {
    std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return out.events[a].start_us < out.events[b].start_us;
    });
    double reach = -1e300;
    for (std::size_t i : list) {
      if (out.events[i].end_us <= reach) dropped[i] = true;
      else reach = out.events[i].end_us;
    }
  }
  // Pair sends with receives in posting order per (source, destination, tag,
  // collective channel or not: a collective's tag is not a user's).
  std::map<std::tuple<int, int, int, bool>, std::vector<std::size_t>> sends, recvs;
  for (std::size_t i = 0; i < n; ++i) {
    const TraceEvent& e = out.events[i];
    if (e.category != "comm") continue;
    const bool collective = e.channel >= 0;
    if (e.is_send) sends[{e.rank, e.peer, e.tag, collective}].push_back(i);
    else recvs[{e.peer, e.rank, e.tag, collective}].push_back(i);
  }
  // On a device, the messages of one collective on one rank (rank, channel,
  // tag) form a group, and the groups of one (rank, channel) a lane: the
  // communicator's stream, which runs its collectives one after another and
  // the rounds of each as they arrive (see the replay rules).
  std::vector<int> group(n, -1);
  std::vector<std::vector<std::size_t>> members;  // per group, in posting order
  std::vector<std::vector<std::size_t>> lanes;    // per (rank, channel), group by group
  if (cluster.device_progress) {
    std::map<std::tuple<int, int, int>, int> groups;
    std::map<std::pair<int, int>, std::size_t> lane_of;
    std::vector<std::size_t> by_time(n);
    for (std::size_t i = 0; i < n; ++i) by_time[i] = i;
    std::stable_sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) {
      return out.events[a].start_us < out.events[b].start_us;
    });
    std::vector<std::vector<int>> lane_groups;
    for (std::size_t i : by_time) {
      const TraceEvent& e = out.events[i];
      if (e.category != "comm" || e.channel < 0 || e.tag < 0) continue;
      const auto [it, made] = groups.try_emplace({e.rank, e.channel, e.tag}, static_cast<int>(members.size()));
      if (made) {
        members.emplace_back();
        const auto [lane, new_lane] = lane_of.try_emplace({e.rank, e.channel}, lane_groups.size());
        if (new_lane) lane_groups.emplace_back();
        lane_groups[lane->second].push_back(it->second);
      }
      group[i] = it->second;
      members[static_cast<std::size_t>(it->second)].push_back(i);
    }
    for (const std::vector<int>& gs : lane_groups) {
      lanes.emplace_back();
      for (int g : gs) lanes.back().insert(lanes.back().end(), members[static_cast<std::size_t>(g)].begin(), members[static_cast<std::size_t>(g)].end());
    }
  }
  std::vector<Message> msg(n);
  auto by_post = [&](std::size_t a, std::size_t b) {
    return out.events[a].start_us < out.events[b].start_us;
  };
  for (auto& [key, s] : sends) {
    std::vector<std::size_t>& r = recvs[key];
    std::sort(s.begin(), s.end(), by_post);
    std::sort(r.begin(), r.end(), by_post);
    for (std::size_t k = 0; k < std::min(s.size(), r.size()); ++k) {
      msg[s[k]] = {-1, r[k], true};
      msg[r[k]] = {-1, s[k], true};
    }
  }
  // Each rank's instants in its own order of calls.
  std::vector<std::vector<Instant>> instants(static_cast<std::size_t>(world));
  std::int64_t looks = 0;  // work done, for replay_looks()
  for (int r = 0; r < world; ++r) {
    // The outermost phases by start; their ends rise too (an end that did
    // not would lie inside an earlier phase), so a binary search finds the
    // first that ends after t, the only one that can hold t.
    std::vector<std::size_t> outer;
    for (std::size_t i : computes[static_cast<std::size_t>(r)])
      if (!dropped[i]) outer.push_back(i);
    auto phase_at = [&](double t) -> int {  // the (outermost) compute phase holding time t
      const auto p = std::partition_point(outer.begin(), outer.end(), [&](std::size_t i) {
        return out.events[i].end_us <= t;
      });
      return p != outer.end() && out.events[*p].start_us < t ? static_cast<int>(*p) : -1;
    };
    for (std::size_t i : outer) {
      instants[r].push_back({out.events[i].start_us, kStart, i});
      instants[r].push_back({out.events[i].end_us, kEnd, i});
    }
    for (std::size_t i : comms[static_cast<std::size_t>(r)]) {
      const TraceEvent& e = out.events[i];
      ++looks;
      instants[r].push_back({e.start_us, kPost, i, phase_at(e.start_us)});
      const int holder = phase_at(e.end_us);
      // Completed inside a compute phase: waited for at its end, but seen
      // complete where the host saw it (later posts depend on it).
      if (holder >= 0) instants[r].push_back({e.end_us, kSeen, i});
      instants[r].push_back({holder >= 0 ? out.events[holder].end_us : e.end_us, kWait, i});
    }
    std::sort(instants[r].begin(), instants[r].end());
  }
  // Advance every rank as far as it can go until all are done.
  std::vector<double> clock(static_cast<std::size_t>(world), 0);
  // Per rank, the latest modeled completion of a call the host had seen
  // complete: a post the host made after that cannot come before it (a ring's
  // next round is sent only once the last round has arrived).
  std::vector<double> seen(static_cast<std::size_t>(world), 0);
  std::vector<std::size_t> next(static_cast<std::size_t>(world), 0);
  std::vector<double> model_start(n, 0), model_end(n, 0);
  // Per group: where the host started it (−1 until the host gets there).
  std::vector<double> group_start(members.size(), -1);
  std::size_t missing = 0;  // the unposted half a completion of −1 waits for
  auto completion = [&](std::size_t i) -> double {  // −1 while a half is not posted
    ++looks;
    const Message& m = msg[i];
    const TraceEvent& e = out.events[i];
    if (m.post < 0) {
      missing = i;
      return -1;
    }
    if (!m.matched) return m.post + cluster.link(e.rank, e.peer).seconds(static_cast<double>(e.bytes));
    const double other = msg[m.partner].post;
    if (other < 0) {
      missing = m.partner;
      return -1;
    }
    const std::size_t send = e.is_send ? i : m.partner, recv = e.is_send ? m.partner : i;
    const double bytes = static_cast<double>(out.events[send].bytes);
    double t = std::max(m.post, other) + cluster.link(e.rank, e.peer).seconds(bytes);
    if (out.events[recv].name == "recv_reduce") t += 3 * bytes / cluster.memory_bw;
    return t;
  };
  // The device's side of each lane: how far it has posted, how far every
  // completion is known, and the latest of those.
  std::vector<std::size_t> lane_next(lanes.size(), 0), lane_known(lanes.size(), 0);
  std::vector<double> lane_free(lanes.size(), 0);
  // A later round waits for the rounds of its collective that had ended on
  // the host by its start. Rounds are posted in order of start, so that set
  // only grows: per group, its rounds by host end, how many of those are
  // known complete, and the latest of their completions (one look per round
  // in all, not one per pair of rounds).
  std::vector<std::vector<std::size_t>> by_end(members);
  for (auto& rounds : by_end)
    std::stable_sort(rounds.begin(), rounds.end(), [&](std::size_t a, std::size_t b) {
      return out.events[a].end_us < out.events[b].end_us;
    });
  std::vector<std::size_t> ended(members.size(), 0);
  std::vector<double> ended_latest(members.size(), std::numeric_limits<double>::lowest());
  // Advance ranks (0 … P−1) and lanes (P + lane) from a list of the ready:
  // one that must wait names what for (a message's post, a collective's
  // start) and is listed again when that happens. Every value is set once
  // from values set before it, so the order of visits changes nothing.
  const std::size_t actors = static_cast<std::size_t>(world) + lanes.size();
  std::vector<std::vector<std::size_t>> waiting(n);  // per message, who waits for its post
  std::vector<std::size_t> ready(actors);
  for (std::size_t a = 0; a < actors; ++a) ready[a] = actors - 1 - a;  // rank 0 first
  std::vector<bool> listed(actors, true);
  auto wake = [&](std::vector<std::size_t>& who) {
    for (std::size_t a : who)
      if (!listed[a]) {
        listed[a] = true;
        ready.push_back(a);
      }
    who.clear();
  };
  // Per group, its lane once that waits for the host to start the group.
  std::vector<std::vector<std::size_t>> starting(members.size());
  auto posted = [&](std::size_t i, double post) {
    msg[i].post = post;
    model_start[i] = post;
    if (!msg[i].matched) ++out.unmatched;
    wake(waiting[i]);
  };
  // Posts lane l's next message if it can; false when it must wait.
  auto post_on_lane = [&](std::size_t l) -> bool {
    const std::vector<std::size_t>& lane = lanes[l];
    const std::size_t i = lane[lane_next[l]];
    const std::size_t g = static_cast<std::size_t>(group[i]);
    if (group_start[g] < 0) return false;  // the host has not started this collective
    double post = 0;
    if (i == members[g].front()) {
      // A collective starts on its stream once the ones before it are done.
      for (; lane_known[l] < lane_next[l]; ++lane_known[l]) {
        const double done = completion(lane[lane_known[l]]);
        if (done < 0) return false;
        lane_free[l] = std::max(lane_free[l], done);
      }
      post = std::max(group_start[g], lane_free[l]);
    } else {
      // A later round: once the rounds the host had seen complete before
      // posting it have arrived.
      const std::vector<std::size_t>& rounds = by_end[g];
      double latest = ended_latest[g];
      bool prefix = true;  // all rounds before q are in ended_latest
      for (std::size_t q = ended[g];
           q < rounds.size() && out.events[rounds[q]].end_us <= out.events[i].start_us; ++q) {
        if (rounds[q] == i) {  // itself (ended as it started): not before it, but before the next
          prefix = false;
          continue;
        }
        const double done = completion(rounds[q]);
        if (done < 0) return false;
        latest = std::max(latest, done);
        if (prefix) {
          ended_latest[g] = latest;
          ended[g] = q + 1;
        }
      }
      post = std::max(msg[members[g].front()].post, latest);
    }
    posted(i, post);
    ++lane_next[l];
    return true;
  };
  while (!ready.empty()) {
    const std::size_t a = ready.back();
    ready.pop_back();
    listed[a] = false;
    ++looks;
    if (a >= static_cast<std::size_t>(world)) {
      const std::size_t l = a - static_cast<std::size_t>(world);
      while (lane_next[l] < lanes[l].size() && post_on_lane(l)) {}
      if (lane_next[l] == lanes[l].size()) continue;
      const std::size_t g = static_cast<std::size_t>(group[lanes[l][lane_next[l]]]);
      (group_start[g] < 0 ? starting[g] : waiting[missing]).push_back(a);
      continue;
    }
    {  // a rank: its calls in order, until one must wait
      const int r = static_cast<int>(a);
      auto& list = instants[static_cast<std::size_t>(r)];
      double& t = clock[static_cast<std::size_t>(r)];
      for (std::size_t& k = next[static_cast<std::size_t>(r)]; k < list.size(); ++k) {
        const Instant& in = list[k];
        const std::size_t i = in.event;
        if (in.kind == kStart) {
          model_start[i] = t;
        } else if (in.kind == kEnd) {
          t = model_start[i] + duration[i];
          model_end[i] = t;
        } else if (in.kind == kPost) {
          double post = t;
          const int g = group[i];
          if (g >= 0 && i != members[static_cast<std::size_t>(g)].front())
            continue;  // a later round: its lane posts it
          if (in.phase >= 0) {  // the same fraction of the modeled phase, not before what it followed
            const TraceEvent& c = out.events[static_cast<std::size_t>(in.phase)];
            const double frac = share_before(out.events[i], c, !cluster.measured_compute);
            post = std::max(model_start[static_cast<std::size_t>(in.phase)] +
                                frac * duration[static_cast<std::size_t>(in.phase)],
                            seen[static_cast<std::size_t>(r)]);
          }
          if (g >= 0) {  // the host starts the collective; its lane posts it
            group_start[static_cast<std::size_t>(g)] = post;
            wake(starting[static_cast<std::size_t>(g)]);
            continue;
          }
          posted(i, post);
        } else if (in.kind == kSeen) {
          const double done = completion(i);
          if (done < 0) {  // the partner has not posted yet: another rank first
            waiting[missing].push_back(a);
            break;
          }
          seen[static_cast<std::size_t>(r)] = std::max(seen[static_cast<std::size_t>(r)], done);
        } else {
          const double done = completion(i);
          if (done < 0) {  // a half is not posted yet: another rank or lane first
            waiting[missing].push_back(a);
            break;
          }
          model_end[i] = done;
          t = std::max(t, done);
        }
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    const auto& list = instants[static_cast<std::size_t>(r)];
    const std::size_t k = next[static_cast<std::size_t>(r)];
    if (k < list.size()) {
      const TraceEvent& e = out.events[list[k].event];
      DTW_CHECK_ARG(false, "replay_on: the trace cannot complete: rank "
                               << r << " waits for its " << e.name << (e.is_send ? " to" : " from")
                               << " rank " << e.peer << " (tag " << e.tag << ", " << e.bytes
                               << " bytes), which never posts its half");
    }
  }
  // The modeled events, without the dropped inner phases.
  std::vector<TraceEvent> modeled;
  for (std::size_t i = 0; i < n; ++i) {
    if (dropped[i]) continue;
    TraceEvent e = out.events[i];
    e.start_us = model_start[i] * 1e6;
    e.end_us = model_end[i] * 1e6;
    modeled.push_back(std::move(e));
  }
  out.events = std::move(modeled);
  g_replay_looks.fetch_add(looks, std::memory_order_relaxed);
  out.timeline = analyze_timeline(out.events, world);
  out.seconds = out.timeline.span;
  return out;
}

}  // namespace dtw::train
