// The threads backend's deadlock check must not grow with the world on every
// blocking call: it keeps a count of stuck ranks and looks at the whole world
// only when the count says every live rank is stuck. These tests count the
// rank states that world-wide operations looked at (an internal counter of
// core/src/threads), so they need no clock: a check that walked the world on
// each blocking call would look at about p states per call, p² in a run.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/dtw.h"
#include "threads/threads_world.h"

namespace dtw {
namespace {

constexpr int kRanks = 1024;

LaunchOptions in(RankMode mode) {
  LaunchOptions options;
  options.rank_mode = mode;
  return options;
}

// Every rank blocks at least twice (2p blocking calls): an exchange around the ring.
void ring_exchanges(Comm& comm, int rounds) {
  const int p = comm.size(), r = comm.rank();
  std::int64_t out = r, in = -1;
  for (int i = 0; i < rounds; ++i) {
    comm.sendrecv(std::span<const std::int64_t>(&out, 1), (r + 1) % p,
                  std::span<std::int64_t>(&in, 1), (r + p - 1) % p, 0);
    if (in != (r + p - 1 - i + p) % p) throw Error("ring exchange got the wrong value");
    out = in;
  }
}

class WorldVisitsTest : public ::testing::TestWithParam<RankMode> {};

TEST_P(WorldVisitsTest, ARunWithoutDeadlockCostsNoWorldWideScans) {
  const std::int64_t before = threads::world_wide_rank_visits();
  launch(kRanks, in(GetParam()), [](Comm& comm) { ring_exchanges(comm, 8); });
  const std::int64_t visits = threads::world_wide_rank_visits() - before;
  // 8 rounds of 1024 ranks block some 16,000 times; a scan per blocking call
  // would look at some 16 million rank states. An instant at which every live
  // rank seems stuck may happen while ranks return; a few such looks are fine.
  EXPECT_LE(visits, 4 * kRanks) << "rank states looked at by world-wide checks";
}

TEST_P(WorldVisitsTest, ADeadlockIsFoundWithOneLookAtTheWorld) {
  const std::int64_t before = threads::world_wide_rank_visits();
  const Report report = launch_collecting(kRanks, in(GetParam()), [](Comm& comm) {
    std::int64_t x = 0;  // every rank receives from its left first: one cycle through all
    comm.recv(std::span<std::int64_t>(&x, 1), (comm.rank() + comm.size() - 1) % comm.size(), 0);
  });
  const std::int64_t visits = threads::world_wide_rank_visits() - before;
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.errors.front().kind, "DeadlockError");
  // The check that finds it, and the aborts of the ranks that then fail.
  EXPECT_LE(visits, 4 * kRanks) << "rank states looked at by world-wide checks";
}

INSTANTIATE_TEST_SUITE_P(Modes, WorldVisitsTest,
                         ::testing::Values(RankMode::kThreads, RankMode::kFibers),
                         [](const auto& mode) {
                           return mode.param == RankMode::kThreads ? "Threads" : "Fibers";
                         });

}  // namespace
}  // namespace dtw
