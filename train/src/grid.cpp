// Grid: one split per combination of named dimensions.
#include "dtw/train/grid.h"

#include <set>
#include <sstream>

#include "dtw/errors.h"

namespace dtw::train {

namespace {
// A split per combination: 2^n − 1 of them. Eight dimensions (255 splits)
// is far more than any layout uses (Megatron's pp, dp, cp, tp, ep: five).
constexpr std::size_t kMaxDims = 8;

std::string list(const std::vector<std::string_view>& names) {
  std::string s = "{";
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s + "}";
}
}  // namespace

Grid::Grid(Comm& world, std::vector<std::pair<std::string, int>> dims)
    : dims_(std::move(dims)), world_rank_(world.rank()) {
  std::int64_t product = 1;
  std::set<std::string> names;
  for (const auto& [name, n] : dims_) {
    DTW_CHECK_ARG(!name.empty() && names.insert(name).second,
                  "Grid " << describe() << ": dimension names must be unique and non-empty");
    DTW_CHECK_ARG(n >= 1, "Grid " << describe() << ": dimension " << name << " has size " << n
                                  << "; sizes must be at least 1");
    product *= n;
  }
  DTW_CHECK_ARG(dims_.size() <= kMaxDims, "Grid " << describe() << ": " << dims_.size()
                                                  << " dimensions; at most " << kMaxDims);
  DTW_CHECK_ARG(product == world.size(), "Grid " << describe() << ": the sizes multiply to "
                                                 << product << " but the world has "
                                                 << world.size() << " ranks");
  // Row-major coordinates: the last dimension varies fastest.
  int rest = world.rank();
  coords_.assign(dims_.size(), 0);
  for (std::size_t d = dims_.size(); d-- > 0;) {
    coords_[d] = rest % dims_[d].second;
    rest /= dims_[d].second;
  }
  // Every combination, here, in the same order on every rank. A split is
  // collective over the world: groups made on first use would be made in
  // the order each rank happens to ask for them, and two ranks asking in
  // different orders wait for each other for ever (the hang of
  // laekov/fastmoe#106, where ranks created their groups in different
  // orders).
  const unsigned combinations = 1u << dims_.size();
  groups_.resize(combinations);
  for (unsigned mask = 1; mask < combinations; ++mask) {
    // The ranks of one group share every coordinate outside the mask: the
    // color is the world rank with the masked coordinates set to 0. The key
    // is the row-major index of the masked coordinates, the rank in the group.
    std::vector<int> c = coords_;
    int key = 0;
    for (std::size_t d = 0; d < dims_.size(); ++d) {
      if (!(mask & (1u << d))) continue;
      key = key * dims_[d].second + coords_[d];
      c[d] = 0;
    }
    groups_[mask] = world.split(rank_at(c), key);
  }
}

std::size_t Grid::index(std::string_view name) const {
  for (std::size_t d = 0; d < dims_.size(); ++d)
    if (dims_[d].first == name) return d;
  DTW_CHECK_ARG(false, "rank " << world_rank_ << ": Grid " << describe() << " has no dimension '"
                               << name << "'");
  return 0;
}

unsigned Grid::mask_of(const std::vector<std::string_view>& names) const {
  DTW_CHECK_ARG(!names.empty(), "rank " << world_rank_ << ": Grid " << describe()
                                        << ": a group needs at least one dimension; got {}");
  unsigned mask = 0;
  for (const std::string_view name : names) {
    std::size_t d = dims_.size();
    for (std::size_t i = 0; i < dims_.size(); ++i)
      if (dims_[i].first == name) d = i;
    DTW_CHECK_ARG(d < dims_.size(), "rank " << world_rank_ << ": Grid " << describe()
                                            << ": group " << list(names)
                                            << " names '" << name << "', which is no dimension");
    DTW_CHECK_ARG(!(mask & (1u << d)), "rank " << world_rank_ << ": Grid " << describe()
                                               << ": group " << list(names) << " names '" << name
                                               << "' twice");
    mask |= 1u << d;
  }
  return mask;
}

Comm& Grid::group(std::string_view name) const { return *groups_[1u << index(name)]; }
Comm& Grid::group(std::initializer_list<std::string_view> names) const {
  return *groups_[mask_of(std::vector<std::string_view>(names))];
}
Comm& Grid::group(const std::vector<std::string>& names) const {
  return *groups_[mask_of(std::vector<std::string_view>(names.begin(), names.end()))];
}
int Grid::coord(std::string_view name) const { return coords_[index(name)]; }
int Grid::size(std::string_view name) const { return dims_[index(name)].second; }

int Grid::neighbour(std::size_t d, int step, Ends ends) const {
  const int n = dims_[d].second, c = coords_[d] + step;
  if (c >= 0 && c < n) return c;
  return ends == Ends::kWrap ? (c + n) % n : -1;
}
int Grid::next(std::string_view name, Ends ends) const { return neighbour(index(name), 1, ends); }
int Grid::prev(std::string_view name, Ends ends) const { return neighbour(index(name), -1, ends); }

int Grid::world_neighbour(std::string_view name, int step, Ends ends) const {
  const std::size_t d = index(name);
  const int c = neighbour(d, step, ends);
  if (c < 0) return -1;
  std::vector<int> at = coords_;
  at[d] = c;
  return rank_at(at);
}
int Grid::next_world(std::string_view name, Ends ends) const { return world_neighbour(name, 1, ends); }
int Grid::prev_world(std::string_view name, Ends ends) const { return world_neighbour(name, -1, ends); }

int Grid::rank_at(const std::vector<int>& coords) const {
  DTW_CHECK_ARG(coords.size() == dims_.size(), "Grid " << describe() << ": " << coords.size()
                                                       << " coordinates for " << dims_.size()
                                                       << " dimensions");
  int rank = 0;
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    DTW_CHECK_ARG(coords[d] >= 0 && coords[d] < dims_[d].second,
                  "Grid " << describe() << ": coordinate " << coords[d] << " of "
                          << dims_[d].first << " is outside [0, " << dims_[d].second << ")");
    rank = rank * dims_[d].second + coords[d];
  }
  return rank;
}

std::string Grid::describe() const {
  std::ostringstream s;
  for (std::size_t d = 0; d < dims_.size(); ++d)
    s << (d ? " × " : "") << dims_[d].first << " " << dims_[d].second;
  return s.str();
}

}  // namespace dtw::train
