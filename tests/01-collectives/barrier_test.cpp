// Step 01.12: the dissemination barrier. No rank may leave a barrier before
// every rank has entered it; ranks arrive at different times on purpose.
#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(BarrierTest, "01.12");

TEST(BarrierTest, NoRankLeavesBeforeAllArrive) {
  constexpr int kRounds = 5;
  for (int p : sweep::kWorlds) {
    if (!sweep::runs_here(p)) continue;
    DTW_TRACE("barrier dissemination, p " << p << ", " << kRounds << " rounds");
    std::array<std::atomic<int>, kRounds> arrived{};
    dtw::testing::launch_bounded(p, [&](Comm& comm) {
      comm.set_verify_collectives(true);
      for (int round = 0; round < kRounds; ++round) {
        // A different rank is late in every round.
        if (comm.rank() == round % comm.size())
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        arrived[round].fetch_add(1);
        barrier(comm);
        EXPECT_EQ(arrived[round].load(), comm.size())
            << "rank " << comm.rank() << " left barrier " << round << " of p " << comm.size()
            << " before every rank arrived";
      }
    });
  }
}

TEST(BarrierTest, DisseminationSendsCeilLgPMessagesPerRank) {
  for (int p : {1, 2, 3, 5, 8, 16}) {
    int lg = 0;
    while ((1 << lg) < p) ++lg;
    DTW_TRACE("barrier dissemination, p " << p << ": each rank sends " << lg << " messages");
    const Report report = dtw::testing::launch_bounded(p, [](Comm& comm) { barrier(comm); });
    for (int src = 0; src < p; ++src) {
      std::int64_t sent = 0;
      for (int dst = 0; dst < p; ++dst) sent += report.traffic.messages(src, dst);
      EXPECT_EQ(sent, lg) << "p " << p << ", rank " << src;
      // Round k signals rank + 2^k.
      for (int k = 0; k < lg; ++k) EXPECT_EQ(report.traffic.messages(src, (src + (1 << k)) % p), 1);
    }
  }
}

}  // namespace
}  // namespace dtw::ch01
