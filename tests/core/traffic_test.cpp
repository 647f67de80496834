// Traffic counters hold only the peers and links actually used: a rank of a
// ring keeps two entries and the launch's report p links, whatever the world
// size, so memory grows with the links used and never as ranks².
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TrafficTest, CountsOnlyThePeersTalkedToSortedByPeer) {
  Traffic t(1000);
  t.count_sent(7, 10);
  t.count_received(3, 5);
  t.count_sent(7, 4);
  t.count_received(7, 0);  // an empty message still counts as one
  ASSERT_EQ(t.peers().size(), 2u);
  EXPECT_EQ(t.peers()[0], (PeerTraffic{3, 0, 0, 5, 1}));
  EXPECT_EQ(t.peers()[1], (PeerTraffic{7, 14, 2, 0, 1}));
  EXPECT_EQ(t.bytes_sent_to(7), 14);
  EXPECT_EQ(t.messages_sent_to(7), 2);
  EXPECT_EQ(t.bytes_received_from(3), 5);
  EXPECT_EQ(t.messages_received_from(7), 1);
  EXPECT_EQ(t.bytes_sent_to(999), 0) << "a peer never talked to reads 0";
  EXPECT_EQ(t.peers().size(), 2u) << "reading a peer adds no entry";
  EXPECT_EQ(t.total_bytes_sent(), 14);
  EXPECT_EQ(t.total_bytes_received(), 5);
}

TEST(TrafficTest, PeerOutsideTheWorldIsAnError) {
  Traffic t(4);
  EXPECT_THAT(error_of([&] { t.count_sent(4, 1); }), HasSubstr("peer 4 out of range [0, 4)"));
  EXPECT_THAT(error_of([&] { (void)t.bytes_received_from(-1); }),
              HasSubstr("peer -1 out of range [0, 4)"));
  EXPECT_TRUE(t.peers().empty());
}

TEST(TrafficMatrixTest, StoresTheLinksUsedSortedWhateverTheOrderAdded) {
  TrafficMatrix m(5);
  m.add(3, 1, 100, 2);
  m.add(0, 4, 8, 1);
  m.add(3, 0, 0, 1);  // a message of no bytes is still a link
  m.add(0, 4, 8, 1);
  m.add(2, 2, 0, 0);  // nothing: no link
  const std::vector<Link> want = {{0, 4, 16, 2}, {3, 0, 0, 1}, {3, 1, 100, 2}};
  EXPECT_EQ(m.links(), want);
  EXPECT_EQ(m.bytes(3, 1), 100);
  EXPECT_EQ(m.messages(3, 0), 1);
  EXPECT_EQ(m.bytes(1, 3), 0);
  EXPECT_EQ(m.links_from(3).size(), 2u);
  EXPECT_TRUE(m.links_from(1).empty());
  EXPECT_EQ(m.bytes_sent(3), 100);
  EXPECT_EQ(m.bytes_received(4), 16);
  EXPECT_EQ(m.total_bytes(), 116);
  EXPECT_EQ(m.total_messages(), 5);
  const std::vector<std::vector<std::int64_t>> dense = m.dense_bytes();
  ASSERT_EQ(dense.size(), 5u);
  EXPECT_EQ(dense[0], (std::vector<std::int64_t>{0, 0, 0, 0, 16}));
  EXPECT_EQ(dense[3], (std::vector<std::int64_t>{0, 100, 0, 0, 0}));
  EXPECT_EQ(m.dense_messages()[3][0], 1);
}

TEST(TrafficMatrixTest, RankOutsideTheWorldOrNegativeCountIsAnError) {
  TrafficMatrix m(3);
  EXPECT_THAT(error_of([&] { m.add(0, 3, 1, 1); }), HasSubstr("dst 3 out of range [0, 3)"));
  EXPECT_THAT(error_of([&] { (void)m.bytes(-1, 0); }), HasSubstr("src -1 out of range [0, 3)"));
  EXPECT_THAT(error_of([&] { m.add(0, 1, -8, 1); }),
              HasSubstr("link 0 -> 1 with -8 bytes in 1 messages: counts are negative"));
  EXPECT_TRUE(m.links().empty());
}

TEST(TrafficTest, ARingOfTwoThousandRanksKeepsTwoPeersARankAndOneLinkARank) {
  constexpr int p = 2048;
  const Report report = testing::launch_bounded(p, [](Comm& comm) {
    const int right = (comm.rank() + 1) % comm.size();
    const int left = (comm.rank() + comm.size() - 1) % comm.size();
    std::int64_t out = comm.rank(), in = -1;
    comm.sendrecv(std::span<const std::int64_t>(&out, 1), right, std::span<std::int64_t>(&in, 1),
                  left, 0);
    // The counters hold the two neighbours, not one slot per world rank.
    const Traffic& t = comm.traffic();
    ASSERT_EQ(t.peers().size(), 2u) << "rank " << comm.rank();
    EXPECT_EQ(t.bytes_sent_to(right), 8);
    EXPECT_EQ(t.bytes_received_from(left), 8);
    EXPECT_EQ(t.bytes_sent_to(comm.rank() ^ 2), 0);
  });
  ASSERT_EQ(report.traffic.world_size(), p);
  // The report holds the p links of the ring, not a p×p matrix.
  ASSERT_EQ(report.traffic.links().size(), static_cast<std::size_t>(p));
  for (const Link& l : report.traffic.links()) {
    EXPECT_EQ(l.dst, (l.src + 1) % p);
    EXPECT_EQ(l.bytes, 8);
    EXPECT_EQ(l.messages, 1);
  }
  EXPECT_EQ(report.total_bytes(), 8 * p);
  EXPECT_THAT(report.traffic_table(), HasSubstr("2048 ranks: 16.0 KiB in 2048 messages over 2048 "
                                                "of 4192256 links"));
}

}  // namespace
}  // namespace dtw
