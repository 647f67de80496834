// Grid: outermost dimension first, innermost adjacent; groups along each
// dimension and along every combination of dimensions (checked by exchanging
// world ranks inside each group); neighbours along a dimension, open or
// wrapped at the ends; sizes that do not multiply to the world, and unknown
// or repeated names, fail on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "dtw/results.h"
#include "dtw/train/grid.h"
#include "dtw_test.h"

namespace dtw::train {
namespace {

TEST(GridTest, CoordinatesAndGroupsOfPpDpTp) {
  dtw::testing::launch_bounded(8, [](Comm& world) {
    const Grid grid(world, {{"pp", 2}, {"dp", 2}, {"tp", 2}});
    const int r = world.rank();
    EXPECT_EQ(grid.coord("pp"), r / 4);
    EXPECT_EQ(grid.coord("dp"), (r / 2) % 2);
    EXPECT_EQ(grid.coord("tp"), r % 2);
    for (const char* dim : {"pp", "dp", "tp"}) {
      Comm& g = grid.group(dim);
      EXPECT_EQ(g.size(), 2);
      EXPECT_EQ(g.rank(), grid.coord(dim));
    }
    // tp groups are adjacent ranks; pp groups are 4 apart.
    EXPECT_EQ(grid.group("tp").world_rank_of(0), r - r % 2);
    EXPECT_EQ(grid.group("pp").world_rank_of(1), r % 4 + 4);
    EXPECT_EQ(grid.rank_at({grid.coord("pp"), grid.coord("dp"), grid.coord("tp")}), r);
    // A sum over the dp group adds exactly the two dp ranks.
    std::vector<int> v = {r};
    reference::allreduce(grid.group("dp"), v, ReduceOp::kSum);
    EXPECT_EQ(v[0], 2 * (r - (r / 2) % 2 * 2) + 2);
    EXPECT_EQ(grid.describe(), "pp 2 × dp 2 × tp 2");
  });
}

TEST(GridTest, OneDimensionAndSizeOneDimensions) {
  dtw::testing::launch_bounded(3, [](Comm& world) {
    const Grid grid(world, {{"pp", 1}, {"dp", 3}});
    EXPECT_EQ(grid.coord("dp"), world.rank());
    EXPECT_EQ(grid.group("pp").size(), 1);
    EXPECT_THROW(grid.group("tp"), InvalidArgument);
  });
}

TEST(GridTest, SizesThatDoNotMultiplyToTheWorldFailOnEveryRank) {
  LaunchOptions o;
  o.timeout = std::chrono::seconds(20);
  const Report report = launch_collecting(6, o, [](Comm& world) {
    Grid grid(world, {{"dp", 2}, {"tp", 2}});
  });
  ASSERT_EQ(report.errors.size(), 6u);
  for (const RankError& e : report.errors) {
    EXPECT_EQ(e.kind, "InvalidArgument");
    EXPECT_NE(e.message.find("Grid dp 2 × tp 2: the sizes multiply to 4 but the world has 6 ranks"),
              std::string::npos)
        << e.message;
  }
  const Report bad = launch_collecting(2, o, [](Comm& world) { Grid g(world, {{"dp", 0}, {"tp", 2}}); });
  ASSERT_FALSE(bad.errors.empty());
  EXPECT_NE(bad.errors[0].message.find("has size 0"), std::string::npos);
}

// Expects `fn` to raise InvalidArgument with every one of `parts` in its message.
template <class F>
void expect_invalid(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgument with '" << parts.back() << "', got none";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

// The world ranks a group along the dimensions of `mask` must hold, in order,
// worked out here from the layout alone: every world rank whose coordinates
// outside the mask are this rank's, sorted by the row-major index of its
// coordinates inside the mask.
std::vector<int> members(const std::vector<int>& sizes, unsigned mask, int me) {
  auto coords = [&](int r) {
    std::vector<int> c(sizes.size());
    for (std::size_t d = sizes.size(); d-- > 0;) c[d] = r % sizes[d], r /= sizes[d];
    return c;
  };
  int world = 1;
  for (int n : sizes) world *= n;
  const std::vector<int> mine = coords(me);
  std::vector<std::pair<int, int>> found;  // (index inside the mask, world rank)
  for (int r = 0; r < world; ++r) {
    const std::vector<int> c = coords(r);
    bool same = true;
    int index = 0;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      if (mask & (1u << d)) index = index * sizes[d] + c[d];
      else same = same && c[d] == mine[d];
    }
    if (same) found.push_back({index, r});
  }
  std::sort(found.begin(), found.end());
  std::vector<int> ranks;
  for (const auto& [index, r] : found) ranks.push_back(r);
  return ranks;
}

TEST(GridTest, CombinedGroupsHoldTheRanksTheLayoutImplies) {
  // Every combination of dimensions at three layouts: each rank learns its
  // group's members by an allgather of world ranks over the group's Comm.
  const std::vector<std::string> names = {"pp", "dp", "tp"};
  for (const std::vector<int>& sizes :
       std::vector<std::vector<int>>{{2, 3, 2}, {1, 4, 1}, {3, 1, 2}}) {
    const int world_size = sizes[0] * sizes[1] * sizes[2];
    DTW_TRACE("pp " << sizes[0] << " × dp " << sizes[1] << " × tp " << sizes[2]);
    dtw::testing::launch_bounded(world_size, [&](Comm& world) {
      const Grid grid(world, {{"pp", sizes[0]}, {"dp", sizes[1]}, {"tp", sizes[2]}});
      for (unsigned mask = 1; mask < 8; ++mask) {
        std::vector<std::string> named;
        for (std::size_t d = 0; d < 3; ++d)
          if (mask & (1u << d)) named.push_back(names[d]);
        Comm& g = grid.group(named);
        const std::vector<int> want = members(sizes, mask, world.rank());
        std::vector<int> got(static_cast<std::size_t>(g.size()), -1);
        reference::allgather(g, std::vector<int>{world.rank()}, got);
        EXPECT_EQ(got, want) << "rank " << world.rank() << ", group of mask " << mask;
        // This rank's number in the group is its place in that order.
        EXPECT_EQ(want[static_cast<std::size_t>(g.rank())], world.rank()) << "mask " << mask;
      }
    });
  }
}

TEST(GridTest, ACombinedGroupIsOrderedByTheGridNotByTheList) {
  dtw::testing::launch_bounded(12, [](Comm& world) {
    const Grid grid(world, {{"pp", 2}, {"dp", 3}, {"cp", 2}});
    Comm& g = grid.group({"cp", "dp"});
    EXPECT_EQ(&g, &grid.group({"dp", "cp"}));
    EXPECT_EQ(g.size(), 6);
    EXPECT_EQ(g.rank(), grid.coord("dp") * 2 + grid.coord("cp"));
    // One name is the dimension's own group; all of them, the world in order.
    EXPECT_EQ(&grid.group({"dp"}), &grid.group("dp"));
    EXPECT_EQ(grid.group({"pp", "dp", "cp"}).rank(), world.rank());
    EXPECT_EQ(grid.group({"pp", "cp"}).rank(), grid.coord("pp") * 2 + grid.coord("cp"));
  });
}

TEST(GridTest, UnknownRepeatedOrNoNamesAreRefusedNamingThem) {
  dtw::testing::launch_bounded(4, [](Comm& world) {
    const Grid grid(world, {{"dp", 2}, {"pp", 2}});
    const std::string rank = "rank " + std::to_string(world.rank()) + ": ";
    expect_invalid([&] { grid.group({"dp", "cp"}); },
                               {rank, "group {dp, cp} names 'cp', which is no dimension"});
    expect_invalid([&] { grid.group({"pp", "dp", "pp"}); },
                               {rank, "group {pp, dp, pp} names 'pp' twice"});
    expect_invalid([&] { grid.group(std::vector<std::string>{}); },
                               {rank, "a group needs at least one dimension"});
    expect_invalid([&] { grid.next("tp"); }, {rank, "has no dimension 'tp'"});
  });
}

TEST(GridTest, NeighboursStopAtTheEndsOrWrapAround) {
  dtw::testing::launch_bounded(4, [](Comm& world) {
    const Grid grid(world, {{"dp", 1}, {"pp", 4}, {"tp", 1}});
    const int s = world.rank();  // the stage: pp is the only dimension larger than 1
    using Ends = Grid::Ends;
    EXPECT_EQ(grid.next("pp"), s < 3 ? s + 1 : -1);
    EXPECT_EQ(grid.prev("pp"), s > 0 ? s - 1 : -1);
    EXPECT_EQ(grid.next("pp", Ends::kWrap), (s + 1) % 4);
    EXPECT_EQ(grid.prev("pp", Ends::kWrap), (s + 3) % 4);
    // A dimension of size 1: no neighbour, or the rank itself on a ring.
    EXPECT_EQ(grid.next("tp"), -1);
    EXPECT_EQ(grid.prev("dp", Ends::kWrap), 0);
  });
  dtw::testing::launch_bounded(12, [](Comm& world) {
    // As world ranks: along pp (stride 6) and along tp (stride 1).
    const Grid grid(world, {{"pp", 2}, {"dp", 3}, {"tp", 2}});
    const int r = world.rank();
    using Ends = Grid::Ends;
    EXPECT_EQ(grid.next_world("pp"), r < 6 ? r + 6 : -1);
    EXPECT_EQ(grid.prev_world("pp"), r >= 6 ? r - 6 : -1);
    EXPECT_EQ(grid.next_world("pp", Ends::kWrap), (r + 6) % 12);
    EXPECT_EQ(grid.next_world("dp", Ends::kWrap), r - r % 6 + (r % 6 + 2) % 6);
    EXPECT_EQ(grid.prev_world("tp"), r % 2 == 1 ? r - 1 : -1);
    // The group rank and the world rank name the same neighbour.
    if (grid.next("dp") >= 0) {
      EXPECT_EQ(grid.group("dp").world_rank_of(grid.next("dp")), grid.next_world("dp"));
    }
  });
}

}  // namespace
}  // namespace dtw::train
