#pragma once
/// @file
/// Process groups: the world as a grid of named dimensions, one communicator
/// per dimension.
///
///     Grid grid(comm, {{"pp", 2}, {"dp", 2}, {"tp", 2}});   // 8 ranks
///     Comm& tp = grid.group("tp");   // the 2 ranks that differ only in tp
///     int stage = grid.coord("pp");
///
/// Dimensions are listed outermost first; the innermost one varies fastest,
/// so its groups are adjacent ranks (world rank = Σ coord·stride, row-major):
/// tensor parallelism, the chattiest, goes last to stay inside a node.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtw/comm.h"

namespace dtw::train {

/// A world split into named dimensions (Megatron's DP×TP×PP process groups).
class Grid {
 public:
  /// Collective over `world`: every rank makes one split per dimension. The
  /// sizes must be at least 1 and multiply to world.size(), names must be
  /// unique and non-empty; otherwise every rank raises the same
  /// InvalidArgument naming the sizes and the world (before any message
  /// moves, so nothing hangs).
  Grid(Comm& world, std::vector<std::pair<std::string, int>> dims);

  /// The communicator of the ranks that share every coordinate but `name`'s,
  /// ordered by their coordinate along `name` (so group(name).rank() ==
  /// coord(name)). InvalidArgument for an unknown name.
  Comm& group(std::string_view name) const;
  /// This rank's coordinate along `name`.
  int coord(std::string_view name) const;
  /// The size of dimension `name`.
  int size(std::string_view name) const;
  /// The world rank at `coords` (one per dimension, in order).
  int rank_at(const std::vector<int>& coords) const;
  /// The dimensions, outermost first.
  const std::vector<std::pair<std::string, int>>& dims() const { return dims_; }
  /// "pp 2 × dp 2 × tp 2".
  std::string describe() const;

 private:
  std::size_t index(std::string_view name) const;
  std::vector<std::pair<std::string, int>> dims_;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<Comm>> groups_;
};

}  // namespace dtw::train
