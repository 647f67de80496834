// The watchdog's words (watchdog.h): a rank's status as it travels to the
// rank that prints the report, and that report, which names the ranks that
// hang and what each waits for. The watchdog itself is watchdog.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "mpi/watchdog.h"

namespace dtw::mpi {
namespace {

constexpr char kSep = '\x1f';
constexpr std::size_t kDetailedRanks = 16;  // ranks shown in full, as on threads
constexpr std::size_t kMaxNamed = 8;        // "rank X ..., and ranks ... wait for it" lines

bool stuck(int kind) { return kind == RankStatus::kBlocked || kind == RankStatus::kPolling; }

// "ranks 0-5, 7, 9-11": runs of consecutive ranks collapse; long lists end in "...".
std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << (ranks.size() == 1 ? "rank " : "ranks ");
  std::size_t runs = 0;
  for (std::size_t i = 0; i < ranks.size(); ++runs) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == 8) {
      out << ", ... (" << ranks.size() - i << " more)";
      break;
    }
    if (i > 0) out << ", ";
    out << ranks[i];
    if (j > i) out << "-" << ranks[j];
    i = j + 1;
  }
  return out.str();
}

}  // namespace

std::string tenths(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// "irecv from rank 1, tag 7, 64 bytes" and a newline (watchdog.h).
std::string describe(const PendingOp& p) {
  std::ostringstream out;
  out << p.op << (p.is_send ? " to rank " : " from rank ") << p.peer << ", tag " << p.tag << ", "
      << p.bytes << " bytes\n";
  return out.str();
}

std::string RankStatus::encode() const {
  std::ostringstream out;
  out << rank << kSep << kind << kSep << timeout_ms << kSep << state << kSep;
  for (std::size_t i = 0; i < waits_on.size(); ++i) out << (i ? "," : "") << waits_on[i];
  out << kSep << detail;
  return out.str();
}

bool RankStatus::decode(std::string_view text, RankStatus& out) {
  std::vector<std::string> field;
  std::size_t at = 0;
  for (int i = 0; i < 5; ++i) {
    const std::size_t end = text.find(kSep, at);
    if (end == std::string_view::npos) return false;
    field.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  out.rank = std::atoi(field[0].c_str());
  out.kind = std::atoi(field[1].c_str());
  out.timeout_ms = std::atoll(field[2].c_str());
  out.state = field[3];
  out.waits_on.clear();
  std::istringstream peers(field[4]);
  for (std::string p; std::getline(peers, p, ',');)
    if (!p.empty()) out.waits_on.push_back(std::atoi(p.c_str()));
  out.detail = std::string(text.substr(at));
  return true;
}

std::string job_report(int world, const std::map<int, RankStatus>& statuses,
                       std::int64_t timeout_ms) {
  std::vector<int> missing;
  int stuck_ranks = 0;
  for (int r = 0; r < world; ++r) {
    const auto it = statuses.find(r);
    if (it == statuses.end()) missing.push_back(r);
    else if (stuck(it->second.kind)) ++stuck_ranks;
  }
  std::ostringstream out;
  out << "dtw mpi watchdog: the job hangs: " << stuck_ranks << " of " << world
      << " ranks blocked or polling without progress (timeout " << timeout_ms / 1000.0 << " s)";
  if (!missing.empty()) out << ", " << missing.size() << " answered nothing";
  out << "\n";

  // The ranks the stuck ones wait for that are not stuck themselves: the
  // silent ones, and those that answered nothing (stopped, killed).
  std::map<int, std::vector<int>> waited_by;
  for (const auto& [r, s] : statuses) {
    if (!stuck(s.kind)) continue;
    for (int p : s.waits_on) {
      if (p < 0 || p >= world || p == r) continue;
      const auto it = statuses.find(p);
      if (it != statuses.end() && stuck(it->second.kind)) continue;
      std::vector<int>& by = waited_by[p];
      if (by.empty() || by.back() != r) by.push_back(r);
    }
  }
  std::vector<int> order;  // shown in full: those waited for, their waiters, then by rank
  std::size_t named = 0;
  for (const auto& [p, by] : waited_by) {
    const auto it = statuses.find(p);
    if (named++ < kMaxNamed) {
      out << "  rank " << p << " "
          << (it == statuses.end() ? "answered nothing (stopped, killed, or unable to run)"
                                   : "is " + it->second.state)
          << ", and " << rank_list(by) << (by.size() == 1 ? " waits" : " wait") << " for it\n";
    }
    order.push_back(p);
  }
  if (named > kMaxNamed) out << "  ... and " << named - kMaxNamed << " more rank(s) waited for\n";
  for (const auto& [p, by] : waited_by) order.insert(order.end(), by.begin(), by.end());
  // Then those that answered nothing though nobody named them (in a collective,
  // a rank waits for all), then every rank by number.
  order.insert(order.end(), missing.begin(), missing.end());
  for (int r = 0; r < world; ++r) order.push_back(r);

  std::vector<char> shown(static_cast<std::size_t>(world), 0);
  std::size_t detailed = 0;
  std::map<std::string, std::vector<int>> rest;  // state -> ranks not shown in full
  for (int r : order) {
    if (shown[static_cast<std::size_t>(r)]) continue;
    shown[static_cast<std::size_t>(r)] = 1;
    const auto it = statuses.find(r);
    if (detailed >= kDetailedRanks) {
      rest[it == statuses.end() ? "answered nothing" : it->second.state].push_back(r);
      continue;
    }
    ++detailed;
    if (it == statuses.end()) out << "  rank " << r << " answered nothing: its watchdog did not run\n";
    else out << it->second.detail;
  }
  if (!rest.empty()) {
    std::size_t others = 0;
    for (const auto& [state, ranks] : rest) others += ranks.size();
    out << "  the other " << others << " rank(s):\n";
    for (auto& [state, ranks] : rest) {
      std::sort(ranks.begin(), ranks.end());
      char count[16];
      std::snprintf(count, sizeof count, "%5zu", ranks.size());
      out << "    " << count << " " << state << ": " << rank_list(ranks) << "\n";
    }
  }
  return out.str();
}

}  // namespace dtw::mpi
