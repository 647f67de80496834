// Grid: one split per named dimension.
#include "dtw/train/grid.h"

#include <set>
#include <sstream>

#include "dtw/errors.h"

namespace dtw::train {

Grid::Grid(Comm& world, std::vector<std::pair<std::string, int>> dims)
    : dims_(std::move(dims)) {
  std::int64_t product = 1;
  std::set<std::string> names;
  for (const auto& [name, n] : dims_) {
    DTW_CHECK_ARG(!name.empty() && names.insert(name).second,
                  "Grid " << describe() << ": dimension names must be unique and non-empty");
    DTW_CHECK_ARG(n >= 1, "Grid " << describe() << ": dimension " << name << " has size " << n
                                  << "; sizes must be at least 1");
    product *= n;
  }
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
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    // Ranks in one group share every other coordinate: the color is the
    // world rank with this dimension's coordinate set to 0.
    std::vector<int> c = coords_;
    c[d] = 0;
    groups_.push_back(world.split(rank_at(c), coords_[d]));
  }
}

std::size_t Grid::index(std::string_view name) const {
  for (std::size_t d = 0; d < dims_.size(); ++d)
    if (dims_[d].first == name) return d;
  DTW_CHECK_ARG(false, "Grid " << describe() << " has no dimension '" << name << "'");
  return 0;
}

Comm& Grid::group(std::string_view name) const { return *groups_[index(name)]; }
int Grid::coord(std::string_view name) const { return coords_[index(name)]; }
int Grid::size(std::string_view name) const { return dims_[index(name)].second; }

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
