// Step 08.1: the grid's groups hold the ranks the layout implies -- checked
// by exchanging world ranks inside each group, not by recomputing a formula
// -- and a layout that cannot run is refused on every rank, naming the rank
// and the values, before any message.
#include "hybrid_test.h"

#include <sstream>

#include "dtw/reference.h"

namespace dtw::ch08 {
namespace {

using testing::layout;
using testing::tiny;

// The world ranks of the members of `group`, in group order, by exchange.
std::vector<int> members(Comm& group, int world_rank) {
  std::vector<int> mine{world_rank}, all(static_cast<std::size_t>(group.size()));
  reference::allgather(group, std::span<const int>(mine), std::span<int>(all));
  return all;
}

// What the text says: world rank = (stage · dp + replica) · tp + slice.
int world_rank_of(const Layout& l, int stage, int replica, int slice) {
  return (stage * l.dp + replica) * l.tp + slice;
}

std::string list(const std::vector<int>& v) {
  std::ostringstream s;
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? " " : "") << v[i];
  return s.str();
}

DTW_TEST_STEPS(GroupsTest, "08.1");
TEST(GroupsTest, EveryRanksGroupsHoldThePeersTheLayoutImplies) {
  for (const Layout& l : {layout(2, 2, 2, 1), layout(2, 1, 4, 1), layout(4, 2, 1, 1),
                          layout(1, 2, 4, 1), layout(2, 3, 1, 1)}) {
    DTW_TRACE("groups of " + l.describe());
    train::run_ranks<double>(tiny(1), testing::on(l.ranks(), false), [&](train::RankRun<double>& run) {
      const int me = run.comm().rank();
      const int slice = me % l.tp, replica = me / l.tp % l.dp, stage = me / (l.tp * l.dp);
      const train::Grid grid = make_grid(run.comm(), l);
      const Groups g = groups_of(grid);
      ASSERT_TRUE(g.pp && g.dp && g.tp && g.world) << "rank " << me << ": a group left null";
      std::vector<int> pp, dp, tp, world;
      for (int s = 0; s < l.pp; ++s) pp.push_back(world_rank_of(l, s, replica, slice));
      for (int d = 0; d < l.dp; ++d) dp.push_back(world_rank_of(l, stage, d, slice));
      for (int k = 0; k < l.tp; ++k) tp.push_back(world_rank_of(l, stage, replica, k));
      for (int r = 0; r < l.ranks(); ++r) world.push_back(r);
      const char* why =
          " (world rank = (stage · dp + replica) · tp + slice: tp innermost, pp outermost)";
      EXPECT_EQ(list(members(*g.pp, me)), list(pp))
          << "rank " << me << ": its pp group should be the same replica's and slice's stages" << why;
      EXPECT_EQ(list(members(*g.dp, me)), list(dp))
          << "rank " << me << ": its dp group should be the same stage's and slice's replicas" << why;
      EXPECT_EQ(list(members(*g.tp, me)), list(tp))
          << "rank " << me << ": its tp group should be the same stage's and replica's slices" << why;
      EXPECT_EQ(list(members(*g.world, me)), list(world)) << "rank " << me << ": the world group";
    });
  }
}

DTW_TEST_STEPS(LayoutCheckTest, "08.1");
TEST(LayoutCheckTest, AxesThatDoNotMultiplyToTheWorldAreRefusedNamingTheValues) {
  DTW_TRACE("check_layout of pp 2 × dp 2 × tp 3 on 8 ranks, and pp 1 × dp 2 × tp 2 on 8");
  ::dtw::testing::expect_error([] { check_layout(tiny(), layout(2, 2, 3, 1), 8, 5); },
                               {"rank 5", "pp 2 × dp 2 × tp 3 is 12 ranks, not 8"});
  ::dtw::testing::expect_error([] { check_layout(tiny(), layout(1, 2, 2, 1), 8, -1); },
                               {"is 4 ranks, not 8"});
}

TEST(LayoutCheckTest, ALayoutThatCanRunPassesOnEveryRank) {
  // Every rank checks the same layout with its own number (and −1 before
  // any rank runs): a check that depends on the rank would stop some of them.
  for (const Layout& l : {layout(2, 2, 2, 2), layout(1, 2, 4, 2), layout(4, 2, 1, 4),
                          layout(1, 8, 1, 1), layout(2, 1, 4, 4, true)}) {
    DTW_TRACE("check_layout of " + l.describe() + " on every rank of 8");
    for (int rank = -1; rank < 8; ++rank)
      EXPECT_NO_THROW(check_layout(tiny(), l, 8, rank)) << l.describe() << ", rank " << rank;
  }
  DTW_TRACE("check_layout of pp 3 × dp 2 × tp 1 on mlp-tiny (3 units)");
  train::RunSpec mlp = train::standard_run("mlp-tiny");
  mlp.batch = 12;
  for (int rank = -1; rank < 6; ++rank)
    EXPECT_NO_THROW(check_layout(mlp, layout(3, 2, 1, 2), 6, rank)) << "rank " << rank;
}

TEST(LayoutCheckTest, TensorSlicesThatDoNotDivideTheHeadsAreRefused) {
  DTW_TRACE("check_layout of pp 1 × dp 1 × tp 3 on gpt-tiny (4 heads)");
  ::dtw::testing::expect_error([] { check_layout(tiny(), layout(1, 1, 3, 1), 3, 2); },
                               {"rank 2", "4 heads", "t = 3"});
}

TEST(LayoutCheckTest, MoreStagesThanUnitsAreRefused) {
  DTW_TRACE("check_layout of pp 5 on gpt-tiny (4 units)");
  ::dtw::testing::expect_error([] { check_layout(tiny(), layout(5, 1, 1, 1), 5, 0); },
                               {"rank 0", "pp 5", "4 units"});
}

TEST(LayoutCheckTest, ABatchSmallerThanReplicasTimesMicroBatchesIsRefused) {
  DTW_TRACE("check_layout of dp 4 × m 3 on a batch of 8");
  ::dtw::testing::expect_error([] { check_layout(tiny(3, 8), layout(1, 4, 1, 3), 4, 1); },
                               {"rank 1", "batch of 8", "dp 4 × m 3"});
}

TEST(LayoutCheckTest, TensorParallelismOnAnMlpIsRefused) {
  DTW_TRACE("check_layout of tp 2 on mlp-tiny");
  train::RunSpec spec = train::standard_run("mlp-tiny");
  ::dtw::testing::expect_error([&] { check_layout(spec, layout(1, 1, 2, 1), 2, 0); },
                               {"rank 0", "tp 2", "mlp-tiny"});
}

}  // namespace
}  // namespace dtw::ch08
