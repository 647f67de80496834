#pragma once
/// @file
/// Process groups: the world as a grid of named dimensions, one communicator
/// per dimension and per combination of dimensions.
///
///     Grid grid(comm, {{"pp", 2}, {"dp", 2}, {"tp", 2}});   // 8 ranks
///     Comm& tp = grid.group("tp");         // the 2 ranks that differ only in tp
///     Comm& dp_tp = grid.group({"dp", "tp"});  // the 4 that differ in dp or tp
///     int stage = grid.coord("pp");
///     int after = grid.next("pp");         // rank in group("pp") of the next stage, or -1
///
/// Dimensions are listed outermost first; the innermost one varies fastest,
/// so its groups are adjacent ranks (world rank = Σ coord·stride, row-major):
/// tensor parallelism, the chattiest, goes last to stay inside a node.

#include <initializer_list>
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
  /// What a neighbour past the last (or before the first) coordinate is.
  enum class Ends {
    kOpen,  ///< none: -1 (a pipeline's first stage has no previous, its last no next)
    kWrap,  ///< the coordinate at the other end: a ring (ring attention, ring allreduce)
  };

  /// Collective over `world`: every rank makes one split for every non-empty
  /// combination of dimensions (2^n − 1 of them for n dimensions), in the
  /// same order, here; group() only looks them up. The sizes must be at
  /// least 1 and multiply to world.size(), names must be unique and
  /// non-empty; otherwise every rank raises the same InvalidArgument naming
  /// the sizes and the world (before any message moves, so nothing hangs).
  Grid(Comm& world, std::vector<std::pair<std::string, int>> dims);

  /// The communicator of the ranks that share every coordinate but `name`'s,
  /// ordered by their coordinate along `name` (so group(name).rank() ==
  /// coord(name)). InvalidArgument naming the rank and the name for an
  /// unknown name.
  Comm& group(std::string_view name) const;
  /// The communicator of the ranks that share every coordinate except those
  /// of `names` (group({"dp", "cp"}): the dp·cp ranks of one pipeline stage
  /// and tensor slice). Ordered row-major over the named dimensions in the
  /// grid's order, whatever the order of `names`: a rank's number in the
  /// group is the row-major index of its named coordinates, so on a grid
  /// pp × dp × cp, group({"cp", "dp"}).rank() == coord("dp")·size("cp") +
  /// coord("cp"). group({name}) is group(name); all the names give a copy of
  /// the world in its own order. InvalidArgument naming the rank and the
  /// names for an empty list, an unknown name or a name given twice.
  Comm& group(std::initializer_list<std::string_view> names) const;
  /// group({...}) with the names in a vector.
  Comm& group(const std::vector<std::string>& names) const;

  /// This rank's coordinate along `name`.
  int coord(std::string_view name) const;
  /// The size of dimension `name`.
  int size(std::string_view name) const;
  /// The world rank at `coords` (one per dimension, in order).
  int rank_at(const std::vector<int>& coords) const;

  /// The neighbour after this rank along `name` (coordinate + 1, every other
  /// coordinate the same) as a rank in group(name), which is its coordinate:
  /// what a pipeline stage sends its activations to on the stage
  /// communicator. Past the last coordinate: -1 with Ends::kOpen, 0 with
  /// Ends::kWrap (a dimension of size 1 wraps onto the rank itself).
  int next(std::string_view name, Ends ends = Ends::kOpen) const;
  /// The neighbour before this rank along `name`, as next() (before the
  /// first coordinate: -1, or size(name) − 1 with Ends::kWrap).
  int prev(std::string_view name, Ends ends = Ends::kOpen) const;
  /// next(name, ends) as a world rank (-1 where next() is).
  int next_world(std::string_view name, Ends ends = Ends::kOpen) const;
  /// prev(name, ends) as a world rank (-1 where prev() is).
  int prev_world(std::string_view name, Ends ends = Ends::kOpen) const;

  /// The dimensions, outermost first.
  const std::vector<std::pair<std::string, int>>& dims() const { return dims_; }
  /// "pp 2 × dp 2 × tp 2".
  std::string describe() const;

 private:
  std::size_t index(std::string_view name) const;
  // The bit mask of `names` (bit d: dimension d), checked.
  unsigned mask_of(const std::vector<std::string_view>& names) const;
  // The coordinate `step` away along dimension d, or -1 past an open end.
  int neighbour(std::size_t d, int step, Ends ends) const;
  int world_neighbour(std::string_view name, int step, Ends ends) const;
  std::vector<std::pair<std::string, int>> dims_;
  std::vector<int> coords_;
  int world_rank_ = 0;
  // groups_[mask]: the ranks that may differ only in the dimensions of
  // `mask`; groups_[0] is unused.
  std::vector<std::unique_ptr<Comm>> groups_;
};

}  // namespace dtw::train
