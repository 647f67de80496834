// Step 00.2: token_ring. The value is checked on every rank for every world
// size and lap count, and the traffic matrix shows the token only ever moved
// one step to the right.
#include <vector>

#include "dtw_test.h"
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using dtw::testing::launch_bounded;

DTW_TEST_STEPS(TokenRingTest, "00.2");
DTW_TEST_STEPS(TokenRingArgumentsTest);

std::int64_t expected_token(std::int64_t start, int p, int laps) {
  return start + static_cast<std::int64_t>(laps) * p * (p + 1) / 2;
}

TEST(TokenRingTest, EveryRankGetsTheFinalToken) {
  for (int p : {1, 2, 3, 7, 16}) {
    for (int laps : {0, 1, 2, 5}) {
      for (std::int64_t start : {std::int64_t{0}, std::int64_t{-42}, std::int64_t{1} << 40}) {
        DTW_TRACE("token ring, p " << p << ", " << laps << " laps, start " << start);
        const std::int64_t want = expected_token(start, p, laps);
        launch_bounded(p, [&](Comm& comm) {
          const std::int64_t got = token_ring(comm, start, laps);
          EXPECT_EQ(got, want) << "rank " << comm.rank() << " of " << p << ", " << laps
                               << " laps, start " << start
                               << ": every rank returns start + laps * p(p+1)/2 (each rank adds "
                                  "its rank + 1 once per lap, and the result is passed on once "
                                  "more from rank 0)";
        });
      }
    }
  }
}

TEST(TokenRingTest, DefaultIsOneLap) {
  DTW_TRACE("token ring, p 5, the default of 1 lap, start 7");
  launch_bounded(5, [](Comm& comm) { EXPECT_EQ(token_ring(comm, 7), 7 + 15); });
}

TEST(TokenRingTest, TokenOnlyMovesToTheRightNeighbour) {
  for (int p : {2, 3, 7, 16}) {
    const int laps = 3;
    DTW_TRACE("token ring traffic, p " << p << ", " << laps << " laps");
    const Report report = launch_bounded(p, [&](Comm& comm) { token_ring(comm, 1, laps); });
    for (int src = 0; src < p; ++src) {
      for (int dst = 0; dst < p; ++dst) {
        // Each link carries one token per lap; the links 0→1 … p−2→p−1 also
        // carry the result on its way back out to everyone.
        std::int64_t want = 0;
        if (dst == (src + 1) % p) want = laps + (src != p - 1 ? 1 : 0);
        const char* rule =
            ": the token only moves right, once per lap on every link, and the result goes "
            "once along 0 -> 1 -> ... -> p-1, starting from rank 0 (which holds it after the "
            "last lap), with nothing back to rank 0";
        EXPECT_EQ(report.traffic.messages(src, dst), want)
            << "p " << p << ", messages " << src << "->" << dst << rule;
        EXPECT_EQ(report.traffic.bytes(src, dst), 8 * want)
            << "p " << p << ", bytes " << src << "->" << dst << rule;
      }
    }
  }
}

TEST(TokenRingTest, WorldOfOneSendsNothing) {
  DTW_TRACE("token ring, p 1, 4 laps, start 10");
  const Report report =
      launch_bounded(1, [](Comm& comm) { EXPECT_EQ(token_ring(comm, 10, 4), 14); });
  EXPECT_EQ(report.traffic.messages(0, 0), 0)
      << "a world of one rank adds its share once per lap and sends nothing";
}

TEST(TokenRingArgumentsTest, RejectsNegativeLaps) {
  for (int p : {1, 3}) {
    EXPECT_THROW(launch_bounded(p, [](Comm& comm) { token_ring(comm, 0, -1); }), InvalidArgument)
        << "p " << p;
  }
}

}  // namespace
}  // namespace dtw::ch00
