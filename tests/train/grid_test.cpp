// Grid: outermost dimension first, innermost adjacent; groups along each
// dimension; sizes that do not multiply to the world fail on every rank.
#include <gtest/gtest.h>

#include <string>
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

}  // namespace
}  // namespace dtw::train
