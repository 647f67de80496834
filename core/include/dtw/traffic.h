#pragma once
/// @file
/// Per-rank traffic counters: bytes and messages exchanged with every peer.

#include <cstdint>
#include <vector>

namespace dtw {

/// What one rank sent to and received from each world rank. Only the owning
/// rank writes it, so no locking is needed; `dtw::launch` gathers all ranks'
/// counters into the report's traffic matrix.
struct Traffic {
  /// Zeroed counters for a world of `world_size` ranks.
  explicit Traffic(int world_size)
      : bytes_sent(world_size), messages_sent(world_size), bytes_received(world_size),
        messages_received(world_size) {}
  std::vector<std::int64_t> bytes_sent;         ///< indexed by destination world rank
  std::vector<std::int64_t> messages_sent;      ///< indexed by destination world rank
  std::vector<std::int64_t> bytes_received;     ///< indexed by source world rank
  std::vector<std::int64_t> messages_received;  ///< indexed by source world rank

  /// Sum of bytes_sent over all peers.
  std::int64_t total_bytes_sent() const;
};

}  // namespace dtw
