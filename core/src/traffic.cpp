// Sparse traffic counters: sorted vectors of the peers and links used, looked
// up by binary search. Most ranks talk to a few peers, so an insert is cheap.
#include "dtw/traffic.h"

#include <algorithm>

#include "dtw/errors.h"

namespace dtw {

Traffic::Traffic(int world_size) : world_size_(world_size) {
  DTW_CHECK_ARG(world_size >= 0, "Traffic: world size " << world_size << " is negative");
}

const PeerTraffic& Traffic::of(int peer) const {
  static const PeerTraffic kNone{};
  DTW_CHECK_ARG(peer >= 0 && peer < world_size_,
                "Traffic: peer " << peer << " out of range [0, " << world_size_ << ")");
  const auto at = std::lower_bound(peers_.begin(), peers_.end(), peer,
                                   [](const PeerTraffic& e, int p) { return e.peer < p; });
  return at != peers_.end() && at->peer == peer ? *at : kNone;
}

PeerTraffic& Traffic::entry(int peer) {
  DTW_CHECK_ARG(peer >= 0 && peer < world_size_,
                "Traffic: peer " << peer << " out of range [0, " << world_size_ << ")");
  const auto at = std::lower_bound(peers_.begin(), peers_.end(), peer,
                                   [](const PeerTraffic& e, int p) { return e.peer < p; });
  if (at != peers_.end() && at->peer == peer) return *at;
  PeerTraffic fresh;
  fresh.peer = peer;
  return *peers_.insert(at, fresh);
}

void Traffic::count_sent(int peer, std::int64_t bytes) {
  PeerTraffic& e = entry(peer);
  e.bytes_sent += bytes;
  e.messages_sent += 1;
}

void Traffic::count_received(int peer, std::int64_t bytes) {
  PeerTraffic& e = entry(peer);
  e.bytes_received += bytes;
  e.messages_received += 1;
}

std::int64_t Traffic::total_bytes_sent() const {
  std::int64_t total = 0;
  for (const PeerTraffic& e : peers_) total += e.bytes_sent;
  return total;
}

std::int64_t Traffic::total_bytes_received() const {
  std::int64_t total = 0;
  for (const PeerTraffic& e : peers_) total += e.bytes_received;
  return total;
}

TrafficMatrix::TrafficMatrix(int world_size) : world_size_(world_size) {
  DTW_CHECK_ARG(world_size >= 0, "TrafficMatrix: world size " << world_size << " is negative");
}

void TrafficMatrix::check_rank(int rank, const char* what) const {
  DTW_CHECK_ARG(rank >= 0 && rank < world_size_, "TrafficMatrix: " << what << " " << rank
                                                                   << " out of range [0, "
                                                                   << world_size_ << ")");
}

namespace {
bool before(const Link& l, std::pair<int, int> key) {
  return std::pair(l.src, l.dst) < key;
}
}  // namespace

const Link* TrafficMatrix::find(int src, int dst) const {
  check_rank(src, "src");
  check_rank(dst, "dst");
  const auto at = std::lower_bound(links_.begin(), links_.end(), std::pair(src, dst), before);
  return at != links_.end() && at->src == src && at->dst == dst ? &*at : nullptr;
}

void TrafficMatrix::add_sent(int src, const Traffic& traffic) {
  for (const PeerTraffic& e : traffic.peers())
    if (e.messages_sent > 0) add(src, e.peer, e.bytes_sent, e.messages_sent);
}

void TrafficMatrix::add(int src, int dst, std::int64_t bytes, std::int64_t messages) {
  check_rank(src, "src");
  check_rank(dst, "dst");
  DTW_CHECK_ARG(bytes >= 0 && messages >= 0,
                "TrafficMatrix: link " << src << " -> " << dst << " with " << bytes << " bytes in "
                                       << messages << " messages: counts are negative");
  if (bytes == 0 && messages == 0) return;
  // Launches add rows in order, so the common case is an append.
  auto at = links_.end();
  if (!links_.empty() && !before(links_.back(), {src, dst}))
    at = std::lower_bound(links_.begin(), links_.end(), std::pair(src, dst), before);
  if (at == links_.end() || at->src != src || at->dst != dst)
    at = links_.insert(at, Link{src, dst, 0, 0});
  at->bytes += bytes;
  at->messages += messages;
}

std::int64_t TrafficMatrix::bytes(int src, int dst) const {
  const Link* l = find(src, dst);
  return l ? l->bytes : 0;
}

std::int64_t TrafficMatrix::messages(int src, int dst) const {
  const Link* l = find(src, dst);
  return l ? l->messages : 0;
}

std::span<const Link> TrafficMatrix::links_from(int src) const {
  check_rank(src, "src");
  const auto first = std::lower_bound(links_.begin(), links_.end(), std::pair(src, 0), before);
  const auto last = std::lower_bound(first, links_.end(), std::pair(src + 1, 0), before);
  return {first, last};
}

std::int64_t TrafficMatrix::bytes_sent(int src) const {
  std::int64_t total = 0;
  for (const Link& l : links_from(src)) total += l.bytes;
  return total;
}

std::int64_t TrafficMatrix::bytes_received(int dst) const {
  check_rank(dst, "dst");
  std::int64_t total = 0;
  for (const Link& l : links_)
    if (l.dst == dst) total += l.bytes;
  return total;
}

std::int64_t TrafficMatrix::total_bytes() const {
  std::int64_t total = 0;
  for (const Link& l : links_) total += l.bytes;
  return total;
}

std::int64_t TrafficMatrix::total_messages() const {
  std::int64_t total = 0;
  for (const Link& l : links_) total += l.messages;
  return total;
}

std::vector<std::vector<std::int64_t>> TrafficMatrix::dense_bytes() const {
  const auto p = static_cast<std::size_t>(world_size_);
  std::vector<std::vector<std::int64_t>> out(p, std::vector<std::int64_t>(p, 0));
  for (const Link& l : links_)
    out[static_cast<std::size_t>(l.src)][static_cast<std::size_t>(l.dst)] = l.bytes;
  return out;
}

std::vector<std::vector<std::int64_t>> TrafficMatrix::dense_messages() const {
  const auto p = static_cast<std::size_t>(world_size_);
  std::vector<std::vector<std::int64_t>> out(p, std::vector<std::int64_t>(p, 0));
  for (const Link& l : links_)
    out[static_cast<std::size_t>(l.src)][static_cast<std::size_t>(l.dst)] = l.messages;
  return out;
}

}  // namespace dtw
