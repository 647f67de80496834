// Comm::split: colors, key ordering, kNoColor, nested splits, and traffic that
// stays counted in world ranks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

TEST(SplitTest, ColorsPartitionTheWorld) {
  for (int world : {1, 2, 5, 6}) {
    launch_bounded(world, [](Comm& comm) {
      const int color = comm.rank() % 2;
      auto sub = comm.split(color, comm.rank());
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sub->size(), (comm.size() + 1 - color) / 2);
      EXPECT_EQ(sub->rank(), comm.rank() / 2);
      EXPECT_EQ(sub->world_rank(), comm.world_rank());
      for (int r = 0; r < sub->size(); ++r) EXPECT_EQ(sub->world_rank_of(r), 2 * r + color);
      // A ring inside each group sees only its own members.
      const int right = (sub->rank() + 1) % sub->size();
      const int left = (sub->rank() + sub->size() - 1) % sub->size();
      const std::vector<std::int32_t> out{comm.rank()};
      std::vector<std::int32_t> in(1, -1);
      sub->sendrecv(out, right, in, left, 0);
      EXPECT_EQ(in[0], sub->world_rank_of(left));
    });
  }
}

TEST(SplitTest, KeyOrdersRanksAndTiesKeepRankOrder) {
  launch_bounded(5, [](Comm& comm) {
    // Keys reverse the order; ranks 1 and 2 tie and keep their parent order.
    const int keys[] = {9, 5, 5, 1, 0};
    auto sub = comm.split(0, keys[comm.rank()]);
    ASSERT_NE(sub, nullptr);
    const std::vector<int> expected_world = {4, 3, 1, 2, 0};
    for (int r = 0; r < 5; ++r) EXPECT_EQ(sub->world_rank_of(r), expected_world[r]);
    EXPECT_EQ(sub->world_rank_of(sub->rank()), comm.rank());
  });
}

TEST(SplitTest, NoColorGivesNoCommunicator) {
  launch_bounded(4, [](Comm& comm) {
    auto sub = comm.split(comm.rank() == 2 ? kNoColor : 0, 0);
    if (comm.rank() == 2) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), 3);
    sub->barrier();
  });
}

TEST(SplitTest, SubgroupTrafficIsSeparateFromParent) {
  // Same (source, tag) in parent and subgroup: messages must not cross over.
  launch_bounded(2, [](Comm& comm) {
    auto sub = comm.split(0, comm.rank());
    const int peer = 1 - comm.rank();
    if (comm.rank() == 0) {
      const std::vector<std::int32_t> one{1}, two{2};
      Request a = comm.isend(one, peer, 0);
      Request b = sub->isend(two, peer, 0);
      sub->wait(b);
      comm.wait(a);
    } else {
      std::vector<std::int32_t> in(1);
      sub->recv(in, peer, 0);
      EXPECT_EQ(in[0], 2);
      comm.recv(in, peer, 0);
      EXPECT_EQ(in[0], 1);
    }
  });
}

TEST(SplitTest, NestedSplitsFormGrid) {
  // 12 ranks as a 3x4 grid: rows, then each row split again into pairs.
  launch_bounded(12, [](Comm& comm) {
    auto row = comm.split(comm.rank() / 4, comm.rank());
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(row->size(), 4);
    auto pair = row->split(row->rank() / 2, -row->rank());  // negative keys reverse
    ASSERT_NE(pair, nullptr);
    EXPECT_EQ(pair->size(), 2);
    EXPECT_EQ(pair->rank(), 1 - row->rank() % 2);
    const int partner = pair->world_rank_of(1 - pair->rank());
    EXPECT_EQ(partner, comm.rank() ^ 1);
    std::vector<std::int32_t> in(1);
    pair->sendrecv(std::vector<std::int32_t>{comm.rank()}, 1 - pair->rank(), in,
                   1 - pair->rank(), 0);
    EXPECT_EQ(in[0], partner);
    // Splitting the same parent twice gives independent groups.
    auto again = row->split(0, 0);
    again->barrier();
    EXPECT_EQ(again->size(), 4);
  });
}

TEST(SplitTest, TrafficIsCountedInWorldRanks) {
  const Report report = launch_bounded(4, [](Comm& comm) {
    auto sub = comm.split(comm.rank() % 2, comm.rank());  // {0,2} and {1,3}
    if (sub->rank() == 0) sub->send(std::vector<double>(10), 1, 0);
    else {
      std::vector<double> in(10);
      sub->recv(in, 0, 0);
      EXPECT_EQ(sub->traffic().bytes_received_from(comm.rank() - 2), 80);
    }
  });
  // The split's own exchange is not user traffic: only the two sends appear.
  const std::vector<std::vector<std::int64_t>> expected = {
      {0, 0, 80, 0}, {0, 0, 0, 80}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  EXPECT_EQ(report.traffic.dense_bytes(), expected);
  EXPECT_EQ(report.traffic.messages(0, 2), 1);
  EXPECT_EQ(report.traffic.messages(1, 3), 1);
  EXPECT_EQ(report.total_bytes(), 160);
}

TEST(SplitTest, SubgroupChecksPeersAgainstItsOwnSize) {
  try {
    launch_bounded(4, [](Comm& comm) {
      auto sub = comm.split(comm.rank() % 2, 0);
      if (comm.rank() == 3) sub->send(std::vector<float>(1), 2, 0);
    });
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.rank(), 3);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1 (world rank 3): send with peer 2"), std::string::npos) << what;
    EXPECT_NE(what.find("[0, 2)"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dtw
