#pragma once
// How the Comm's own messages name a rank.
#include <string>

namespace dtw::detail {
// "rank 2", or "rank 1 (world rank 3)" inside a split group, so a message
// names the rank the caller's code uses and the one the launch report uses.
inline std::string who(int rank, int world_rank) {
  std::string s = "rank " + std::to_string(rank);
  if (rank != world_rank) s += " (world rank " + std::to_string(world_rank) + ")";
  return s;
}
}  // namespace dtw::detail
