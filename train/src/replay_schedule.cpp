// The replay's event list and worklist: each rank's calls in its own order,
// and the ranks and lanes advanced from a list of the ready until every
// event has its modeled time.
#include <algorithm>
#include <limits>
#include <tuple>

#include "dtw/errors.h"
#include "replay.h"

namespace dtw::train::replay {
namespace {

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

// The event list: rank r's instants in its own order of calls.
std::vector<Instant> rank_instants(const std::vector<TraceEvent>& events, const Calls& calls,
                                   int r, std::int64_t& looks) {
  std::vector<Instant> list;
  // The outermost phases by start; their ends rise too (an end that did
  // not would lie inside an earlier phase), so a binary search finds the
  // first that ends after t, the only one that can hold t.
  std::vector<std::size_t> outer;
  for (std::size_t i : calls.computes[static_cast<std::size_t>(r)])
    if (!calls.dropped[i]) outer.push_back(i);
  auto phase_at = [&](double t) -> int {  // the (outermost) compute phase holding time t
    const auto p = std::partition_point(outer.begin(), outer.end(),
                                        [&](std::size_t i) { return events[i].end_us <= t; });
    return p != outer.end() && events[*p].start_us < t ? static_cast<int>(*p) : -1;
  };
  for (std::size_t i : outer) {
    list.push_back({events[i].start_us, kStart, i});
    list.push_back({events[i].end_us, kEnd, i});
  }
  for (std::size_t i : calls.comms[static_cast<std::size_t>(r)]) {
    const TraceEvent& e = events[i];
    ++looks;
    list.push_back({e.start_us, kPost, i, phase_at(e.start_us)});
    const int holder = phase_at(e.end_us);
    // Completed inside a compute phase: waited for at its end, but seen
    // complete where the host saw it (later posts depend on it).
    if (holder >= 0) list.push_back({e.end_us, kSeen, i});
    list.push_back({holder >= 0 ? events[static_cast<std::size_t>(holder)].end_us : e.end_us,
                    kWait, i});
  }
  std::sort(list.begin(), list.end());
  return list;
}

// The worklist. Ranks (0 … P−1) and lanes (P + lane) advance from a list of
// the ready: one that must wait names what for (a message's post, a
// collective's start) and is listed again when that happens. Every value is
// set once from values set before it, so the order of visits changes
// nothing.
class Worklist {
 public:
  Worklist(const std::vector<TraceEvent>& events, int world, const Cluster& cluster,
           const Calls& calls, const Collectives& collectives, LinkTiming& links,
           std::int64_t& looks)
      : events_(events), world_(world), cluster_(cluster), calls_(calls), cs_(collectives),
        links_(links), looks_(looks) {
    const std::size_t n = events.size(), ranks = static_cast<std::size_t>(world);
    for (int r = 0; r < world; ++r) instants_.push_back(rank_instants(events, calls, r, looks));
    clock_.assign(ranks, 0);
    seen_.assign(ranks, 0);
    next_.assign(ranks, 0);
    placed_.start.assign(n, 0);
    placed_.end.assign(n, 0);
    group_start_.assign(cs_.members.size(), -1);
    starting_.resize(cs_.members.size());
    ended_.assign(cs_.members.size(), 0);
    ended_latest_.assign(cs_.members.size(), std::numeric_limits<double>::lowest());
    lane_next_.assign(cs_.lanes.size(), 0);
    lane_known_.assign(cs_.lanes.size(), 0);
    lane_free_.assign(cs_.lanes.size(), 0);
    waiting_.resize(n);
    const std::size_t actors = ranks + cs_.lanes.size();
    ready_.resize(actors);
    for (std::size_t a = 0; a < actors; ++a) ready_[a] = actors - 1 - a;  // rank 0 first
    listed_.assign(actors, true);
  }

  Placed run() {
    while (!ready_.empty()) {
      const std::size_t a = ready_.back();
      ready_.pop_back();
      listed_[a] = false;
      ++looks_;
      if (a >= static_cast<std::size_t>(world_)) advance_lane(a);
      else advance_rank(static_cast<int>(a));
    }
    check_complete();
    return std::move(placed_);
  }

 private:
  void wake(std::vector<std::size_t>& who) {
    for (std::size_t a : who)
      if (!listed_[a]) {
        listed_[a] = true;
        ready_.push_back(a);
      }
    who.clear();
  }

  void posted(std::size_t i, double post) {
    Message& m = links_.message(i);
    m.post = post;
    placed_.start[i] = post;
    if (!m.matched) ++placed_.unmatched;
    wake(waiting_[i]);
  }

  // Lane `a` (a device stream): posts its messages in order while it can.
  void advance_lane(std::size_t a) {
    const std::size_t l = a - static_cast<std::size_t>(world_);
    while (lane_next_[l] < cs_.lanes[l].size() && post_on_lane(l)) {}
    if (lane_next_[l] == cs_.lanes[l].size()) return;
    const std::size_t g = static_cast<std::size_t>(cs_.group[cs_.lanes[l][lane_next_[l]]]);
    (group_start_[g] < 0 ? starting_[g] : waiting_[links_.missing()]).push_back(a);
  }

  // Posts lane l's next message if it can; false when it must wait.
  bool post_on_lane(std::size_t l) {
    const std::vector<std::size_t>& lane = cs_.lanes[l];
    const std::size_t i = lane[lane_next_[l]];
    const std::size_t g = static_cast<std::size_t>(cs_.group[i]);
    if (group_start_[g] < 0) return false;  // the host has not started this collective
    double post = 0;
    if (i == cs_.members[g].front()) {
      // A collective starts on its stream once the ones before it are done.
      for (; lane_known_[l] < lane_next_[l]; ++lane_known_[l]) {
        const double done = links_.completion(lane[lane_known_[l]]);
        if (done < 0) return false;
        lane_free_[l] = std::max(lane_free_[l], done);
      }
      post = std::max(group_start_[g], lane_free_[l]);
    } else {
      // A later round: once the rounds the host had seen complete before
      // posting it have arrived (a per-group prefix of its rounds by end,
      // so each round is looked at once in all).
      const std::vector<std::size_t>& rounds = cs_.by_end[g];
      double latest = ended_latest_[g];
      bool prefix = true;  // all rounds before q are in ended_latest_
      for (std::size_t q = ended_[g];
           q < rounds.size() && events_[rounds[q]].end_us <= events_[i].start_us; ++q) {
        if (rounds[q] == i) {  // itself (ended as it started): not before it, but before the next
          prefix = false;
          continue;
        }
        const double done = links_.completion(rounds[q]);
        if (done < 0) return false;
        latest = std::max(latest, done);
        if (prefix) {
          ended_latest_[g] = latest;
          ended_[g] = q + 1;
        }
      }
      post = std::max(links_.message(cs_.members[g].front()).post, latest);
    }
    posted(i, post);
    ++lane_next_[l];
    return true;
  }

  // Rank r: its calls in order, until one must wait.
  void advance_rank(int r) {
    const std::size_t a = static_cast<std::size_t>(r);
    const std::vector<Instant>& list = instants_[a];
    double& t = clock_[a];
    for (std::size_t& k = next_[a]; k < list.size(); ++k) {
      const Instant& in = list[k];
      const std::size_t i = in.event;
      if (in.kind == kStart) {
        placed_.start[i] = t;
      } else if (in.kind == kEnd) {
        t = placed_.start[i] + calls_.duration[i];
        placed_.end[i] = t;
      } else if (in.kind == kPost) {
        const int g = cs_.group[i];
        if (g >= 0 && i != cs_.members[static_cast<std::size_t>(g)].front())
          continue;  // a later round: its lane posts it
        const double post = post_time(r, in, t);
        if (g >= 0) {  // the host starts the collective; its lane posts it
          group_start_[static_cast<std::size_t>(g)] = post;
          wake(starting_[static_cast<std::size_t>(g)]);
          continue;
        }
        posted(i, post);
      } else {  // kSeen, kWait
        const double done = links_.completion(i);
        if (done < 0) {  // a half is not posted yet: another rank or lane first
          waiting_[links_.missing()].push_back(a);
          return;
        }
        if (in.kind == kSeen) {
          seen_[a] = std::max(seen_[a], done);
        } else {
          placed_.end[i] = done;
          t = std::max(t, done);
        }
      }
    }
  }

  // Where rank r posts the call of `in`: at its clock `t`, or inside a
  // compute phase at the same share of the modeled phase as of the traced
  // one, never before what its rank had seen complete.
  double post_time(int r, const Instant& in, double t) const {
    if (in.phase < 0) return t;
    const std::size_t c = static_cast<std::size_t>(in.phase);
    const double frac = share_before(events_[in.event], events_[c], !cluster_.measured_compute);
    return std::max(placed_.start[c] + frac * calls_.duration[c], seen_[static_cast<std::size_t>(r)]);
  }

  void check_complete() const {
    for (int r = 0; r < world_; ++r) {
      const auto& list = instants_[static_cast<std::size_t>(r)];
      const std::size_t k = next_[static_cast<std::size_t>(r)];
      if (k < list.size()) {
        const TraceEvent& e = events_[list[k].event];
        DTW_CHECK_ARG(false, "replay_on: the trace cannot complete: rank "
                                 << r << " waits for its " << e.name
                                 << (e.is_send ? " to" : " from") << " rank " << e.peer << " (tag "
                                 << e.tag << ", " << e.bytes << " bytes), which never posts its half");
      }
    }
  }

  const std::vector<TraceEvent>& events_;
  const int world_;
  const Cluster& cluster_;
  const Calls& calls_;
  const Collectives& cs_;
  LinkTiming& links_;
  std::int64_t& looks_;
  std::vector<std::vector<Instant>> instants_;  // per rank, its own order
  std::vector<double> clock_;  // per rank, its modeled time
  // Per rank, the latest modeled completion of a call the host had seen
  // complete: a post the host made after that cannot come before it (a ring's
  // next round is sent only once the last round has arrived).
  std::vector<double> seen_;
  std::vector<std::size_t> next_;  // per rank, its next instant
  Placed placed_;
  // Per group: where the host started it (−1 until the host gets there), and
  // the lanes waiting for that.
  std::vector<double> group_start_;
  std::vector<std::vector<std::size_t>> starting_;
  // Per group: how many of its rounds by end are known complete, and the
  // latest of their completions.
  std::vector<std::size_t> ended_;
  std::vector<double> ended_latest_;
  // Per lane: how far it has posted, how far every completion is known, and
  // the latest of those.
  std::vector<std::size_t> lane_next_, lane_known_;
  std::vector<double> lane_free_;
  std::vector<std::vector<std::size_t>> waiting_;  // per message, who waits for its post
  std::vector<std::size_t> ready_;
  std::vector<bool> listed_;
};

}  // namespace

Placed schedule(const std::vector<TraceEvent>& events, int world, const Cluster& cluster,
                const Calls& calls, const Collectives& collectives, LinkTiming& links,
                std::int64_t& looks) {
  return Worklist(events, world, cluster, calls, collectives, links, looks).run();
}

}  // namespace dtw::train::replay
