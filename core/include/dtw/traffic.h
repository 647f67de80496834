#pragma once
/// @file
/// Traffic counters: what one rank exchanged with each peer it talked to
/// (`Traffic`), and what a whole launch moved over each link (`TrafficMatrix`).
/// Both store only the peers and links actually used, so a ring of p ranks
/// costs O(p) memory, not O(p²).

#include <cstdint>
#include <span>
#include <vector>

namespace dtw {

/// One rank's counters for one peer it talked to.
struct PeerTraffic {
  int peer = -1;                       ///< the peer's world rank
  std::int64_t bytes_sent = 0;         ///< payload bytes sent to `peer`
  std::int64_t messages_sent = 0;      ///< messages sent to `peer`
  std::int64_t bytes_received = 0;     ///< payload bytes received from `peer`
  std::int64_t messages_received = 0;  ///< messages received from `peer`
  /// Field-by-field equality.
  bool operator==(const PeerTraffic&) const = default;
};

/// What one rank sent to and received from each world rank. Only the peers it
/// talked to have an entry, so a rank of a ring holds two whatever the world
/// size. Only the owning rank writes it, so no locking is needed;
/// `dtw::launch` gathers every rank's sent counters into `Report::traffic`.
///
///     const Traffic& t = comm.traffic();
///     t.bytes_sent_to(right);          // 0 for a peer never sent to
///     for (const PeerTraffic& e : t.peers()) use(e.peer, e.bytes_received);
class Traffic {
 public:
  /// No counters yet, for a world of `world_size` ranks (peers are world ranks).
  explicit Traffic(int world_size);

  /// The number of world ranks a peer may be.
  int world_size() const { return world_size_; }

  /// Counts one message of `bytes` payload bytes sent to world rank `peer`.
  void count_sent(int peer, std::int64_t bytes);
  /// Counts one message of `bytes` payload bytes received from world rank `peer`.
  void count_received(int peer, std::int64_t bytes);

  /// Payload bytes sent to world rank `peer` (0 if none).
  std::int64_t bytes_sent_to(int peer) const { return of(peer).bytes_sent; }
  /// Messages sent to world rank `peer` (0 if none).
  std::int64_t messages_sent_to(int peer) const { return of(peer).messages_sent; }
  /// Payload bytes received from world rank `peer` (0 if none).
  std::int64_t bytes_received_from(int peer) const { return of(peer).bytes_received; }
  /// Messages received from world rank `peer` (0 if none).
  std::int64_t messages_received_from(int peer) const { return of(peer).messages_received; }

  /// Sum of the bytes sent to every peer.
  std::int64_t total_bytes_sent() const;
  /// Sum of the bytes received from every peer.
  std::int64_t total_bytes_received() const;

  /// One entry per peer this rank sent to or received from, sorted by peer.
  const std::vector<PeerTraffic>& peers() const { return peers_; }

 private:
  // The entry of `peer`, or a zero entry when this rank never talked to it;
  // throws InvalidArgument for a peer outside [0, world_size).
  const PeerTraffic& of(int peer) const;
  PeerTraffic& entry(int peer);

  int world_size_;
  std::vector<PeerTraffic> peers_;
};

/// One directed link of a world and what went over it in a launch.
struct Link {
  int src = 0;                ///< the sender's world rank
  int dst = 0;                ///< the receiver's world rank
  std::int64_t bytes = 0;     ///< payload bytes `src` sent to `dst`
  std::int64_t messages = 0;  ///< how many messages `src` sent to `dst`
  /// Field-by-field equality.
  bool operator==(const Link&) const = default;
};

/// What a launch sent over every link (src → dst) of its world. Only the links
/// used are stored, sorted by (src, dst), so memory grows with the number of
/// links used: p for a ring, p(p−1) only for an all-to-all.
///
///     report.traffic.bytes(0, 1);      // what rank 0 sent to rank 1 (0 if nothing)
///     for (const Link& l : report.traffic.links()) use(l.src, l.dst, l.bytes);
class TrafficMatrix {
 public:
  /// No links, a world of no ranks.
  TrafficMatrix() = default;
  /// No links yet, for a world of `world_size` ranks.
  explicit TrafficMatrix(int world_size);

  /// The number of ranks of the world (the matrix is world_size × world_size).
  int world_size() const { return world_size_; }

  /// Adds what world rank `src` sent, from its counters (receives are the
  /// other side of some rank's sends and are not added).
  void add_sent(int src, const Traffic& traffic);
  /// Adds `bytes` and `messages` to the link src → dst (throws
  /// InvalidArgument for a rank outside [0, world_size) or a negative count).
  void add(int src, int dst, std::int64_t bytes, std::int64_t messages);

  /// Payload bytes world rank `src` sent to world rank `dst` (0 if none).
  std::int64_t bytes(int src, int dst) const;
  /// Messages world rank `src` sent to world rank `dst` (0 if none).
  std::int64_t messages(int src, int dst) const;
  /// Every link `src` sent on, sorted by `dst`.
  std::span<const Link> links_from(int src) const;
  /// Payload bytes world rank `src` sent, to every peer (a row's sum).
  std::int64_t bytes_sent(int src) const;
  /// Payload bytes world rank `dst` received, from every peer (a column's sum;
  /// scans every link).
  std::int64_t bytes_received(int dst) const;
  /// Payload bytes sent over every link.
  std::int64_t total_bytes() const;
  /// Messages sent over every link.
  std::int64_t total_messages() const;

  /// Every link that carried at least one message, sorted by (src, dst).
  const std::vector<Link>& links() const { return links_; }

  /// The bytes as a dense matrix, `[src][dst]`. It takes world_size² numbers:
  /// for small worlds (a test, a plot), not for thousands of ranks.
  std::vector<std::vector<std::int64_t>> dense_bytes() const;
  /// The messages as a dense matrix, `[src][dst]`, as `dense_bytes`.
  std::vector<std::vector<std::int64_t>> dense_messages() const;

 private:
  void check_rank(int rank, const char* what) const;
  const Link* find(int src, int dst) const;

  int world_size_ = 0;
  std::vector<Link> links_;
};

}  // namespace dtw
