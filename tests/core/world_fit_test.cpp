// The threads backend refuses a world that cannot fit the machine before it
// starts a thread, naming the world, the need and the room in numbers.
#include "dtw/world_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "dtw/dtw.h"

namespace dtw {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

std::string refusal(int ranks, const MachineRoom& room) {
  try {
    check_threads_world_fits(ranks, room);
  } catch (const OutOfMemory& e) {
    return e.what();
  }
  return "";
}

TEST(WorldFitTest, NeedsAThreadAndTwoMapsPerRankAndMemoryGrowingLinearly) {
  const WorldNeeds one = threads_world_needs(1024), four = threads_world_needs(4096);
  EXPECT_EQ(one.threads, 1024);
  EXPECT_EQ(one.memory_maps, 2048);
  // 4× the ranks: 4× the memory. The traffic counters are per peer talked to,
  // not per world rank, so nothing grows as ranks².
  EXPECT_EQ(four.bytes, 4 * one.bytes);
  // Between 64 KiB and 1 MiB a rank: its stack pages and book-keeping
  // (measured about 110 KiB at 4096 ranks, docs/results/threads_at_scale.md).
  EXPECT_GE(four.bytes, 4096LL * (64 << 10));
  EXPECT_LE(four.bytes, 4096LL * (1 << 20));
}

TEST(WorldFitTest, TooLittleMemoryIsRefusedWithTheNeedAndTheRoom) {
  MachineRoom room;
  room.bytes_available = 100LL << 20;
  const std::string why = refusal(4096, room);
  EXPECT_THAT(why, HasSubstr("a world of 4096 rank threads needs about"));
  EXPECT_THAT(why, HasSubstr("but this machine has 100 MiB available"));
  EXPECT_THAT(why, HasSubstr("fewer ranks"));
  EXPECT_EQ(refusal(16, room), "") << "16 ranks fit in 100 MiB";
}

TEST(WorldFitTest, TooFewThreadsOrMapsLeftAreRefused) {
  MachineRoom threads;
  threads.threads_left = 100;
  EXPECT_THAT(refusal(1000, threads), HasSubstr("needs 1000 threads, but this process may start "
                                                "only 100 more"));
  EXPECT_EQ(refusal(100, threads), "");
  MachineRoom maps;
  maps.memory_maps_left = 1000;
  EXPECT_THAT(refusal(1000, maps), HasSubstr("needs 2000 memory maps"));
  EXPECT_THAT(refusal(1000, maps), HasSubstr("vm.max_map_count leaves 1000"));
}

TEST(WorldFitTest, UnknownRoomIsNotChecked) {
  EXPECT_EQ(refusal(1 << 20, MachineRoom{}), "");
}

TEST(WorldFitTest, ThisMachineFitsAWorldOfTwoHundredRanksAndLaunchesIt) {
  const MachineRoom room = machine_room();
  EXPECT_EQ(refusal(200, room), "");
  // Past the launch's own check (from 64 ranks): every rank runs.
  const Report report = launch(200, [](Comm& comm) { comm.barrier(); });
  EXPECT_EQ(report.world_size, 200);
  EXPECT_TRUE(report.errors.empty());
}

TEST(WorldFitTest, LaunchRefusesAWorldBeyondTheMachineBeforeStartingIt) {
  const MachineRoom room = machine_room();
  if (room.bytes_available < 0) GTEST_SKIP() << "no /proc/meminfo here";
  // The smallest world whose estimate exceeds the available memory.
  int ranks = 1024;
  // The estimate of the mode the launch will pick (fibers need less a rank).
  const auto needs = [](int p) {
    return threads_world_needs(p, ranks_run_as_fibers(p, RankMode::kAuto) ? 1 : 0);
  };
  while (needs(ranks).bytes <= room.bytes_available) ranks *= 2;
  bool ran = false;
  try {
    launch(ranks, [&](Comm&) { ran = true; });
    ADD_FAILURE() << "a world of " << ranks << " ranks was not refused";
  } catch (const OutOfMemory& e) {
    // Threads or fibers (a world this large on a small machine is fibers).
    EXPECT_THAT(std::string(e.what()), ContainsRegex("rank (threads|fibers) needs about"));
  }
  EXPECT_FALSE(ran) << "a rank started before the refusal";
}

}  // namespace
}  // namespace dtw
