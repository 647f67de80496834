// The threads backend refuses a world that cannot fit the machine before it
// starts a thread, naming the world, the need and the room in numbers.
#include "dtw/world_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <fstream>
#include <limits>
#include <new>
#include <string>

#include "dtw/dtw.h"

namespace dtw {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

std::string refusal(int ranks, const MachineRoom& room, int fiber_workers = 0,
                    std::int64_t bytes_per_rank = 0) {
  try {
    check_threads_world_fits(ranks, room, fiber_workers, bytes_per_rank);
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

TEST(WorldFitTest, TheRanksDataIsPartOfTheNeed) {
  constexpr std::int64_t kData = 256LL << 20;
  const WorldNeeds bare = threads_world_needs(8), loaded = threads_world_needs(8, 0, kData);
  EXPECT_EQ(bare.data_bytes, 0);
  EXPECT_EQ(loaded.data_bytes, 8 * kData);
  EXPECT_EQ(loaded.bytes, bare.bytes + 8 * kData);
  EXPECT_EQ(loaded.address_space, bare.address_space + 8 * kData);
  // A fiber's stack is 1 MiB of address space, touched or not.
  EXPECT_GE(threads_world_needs(4096, 2).address_space, 4096LL << 20);
  // An absurd declaration saturates instead of wrapping to a small number.
  const WorldNeeds absurd = threads_world_needs(1 << 30, 0, std::int64_t{1} << 62);
  EXPECT_EQ(absurd.bytes, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(absurd.address_space, std::numeric_limits<std::int64_t>::max());
}

TEST(WorldFitTest, RanksWhoseDataCannotFitAreRefusedNamingTheData) {
  MachineRoom room;
  room.bytes_available = 1LL << 30;
  // 8 ranks of 256 MiB: 2 GiB, twice the room; 2 ranks fit.
  const std::string why = refusal(8, room, 0, 256LL << 20);
  EXPECT_THAT(why, HasSubstr("a world of 8 rank threads needs about 2.0 GiB"));
  EXPECT_THAT(why, HasSubstr("of which 256 MiB its data"));
  EXPECT_THAT(why, HasSubstr("but this machine has 1.0 GiB available (MemAvailable)"));
  EXPECT_THAT(why, HasSubstr("less data a rank"));
  EXPECT_EQ(refusal(2, room, 0, 256LL << 20), "");
}

TEST(WorldFitTest, AnAddressSpaceLimitIsCheckedAndNamed) {
  MachineRoom room;
  room.address_space_left = 2LL << 30;
  // 4096 fibers reserve 4 GiB of stacks, more than `ulimit -v` leaves.
  const std::string why = refusal(4096, room, 2);
  EXPECT_THAT(why, HasSubstr("a world of 4096 rank fibers needs about 4.0 GiB of address space"));
  EXPECT_THAT(why, HasSubstr("the address-space limit (`ulimit -v`, RLIMIT_AS) leaves 2.0 GiB"));
  EXPECT_EQ(refusal(1024, room, 2), "");
  // The data counts too.
  EXPECT_THAT(refusal(4, room, 2, 1LL << 30), HasSubstr("of address space"));
}

// RAII: lowers the soft RLIMIT_AS for one scope (the hard limit stays, so the
// soft one can be restored).
class ScopedAddressSpaceLimit {
 public:
  explicit ScopedAddressSpaceLimit(rlim_t bytes) {
    getrlimit(RLIMIT_AS, &old_);
    rlimit lower = old_;
    lower.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_AS, &lower) == 0;
  }
  ~ScopedAddressSpaceLimit() { setrlimit(RLIMIT_AS, &old_); }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  bool ok_ = false;
};

TEST(WorldFitTest, LaunchReadsTheAddressSpaceLimitAndRefusesAWorldBeyondIt) {
  const MachineRoom before = machine_room();
  rlimit as{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &as), 0);
  if (before.address_space_left >= 0 || as.rlim_max != RLIM_INFINITY)
    GTEST_SKIP() << "this process runs under an address-space limit already";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer maps its shadow memory on demand: no address-space limit under it";
#endif
  // The process's mapped size now plus 512 MiB: 1024 rank fibers (1 GiB of
  // stacks) cannot fit, and nothing is mapped to find that out.
  std::int64_t mapped_kib = -1;
  {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0) mapped_kib = std::stoll(line.substr(7));
  }
  if (mapped_kib < 0) GTEST_SKIP() << "no /proc/self/status here";
  bool ran = false;
  std::string why;
  MachineRoom room;
  {
    const ScopedAddressSpaceLimit limit(static_cast<rlim_t>(mapped_kib * 1024 + (512LL << 20)));
    ASSERT_TRUE(limit.ok());
    room = machine_room();
    LaunchOptions options;
    options.rank_mode = RankMode::kFibers;
    try {
      launch(1024, options, [&](Comm&) { ran = true; });
    } catch (const OutOfMemory& e) {
      why = e.what();
    }
  }
  EXPECT_GT(room.address_space_left, 256LL << 20);
  EXPECT_LE(room.address_space_left, 512LL << 20);
  EXPECT_THAT(why, HasSubstr("a world of 1024 rank fibers needs about"));
  EXPECT_THAT(why, HasSubstr("`ulimit -v`, RLIMIT_AS"));
  EXPECT_FALSE(ran) << "a rank started before the refusal";
  EXPECT_EQ(machine_room().address_space_left, -1) << "the limit was restored";
}

TEST(WorldFitTest, LaunchRefusesRanksWhoseDeclaredDataCannotFitBeforeStartingOne) {
  if (machine_room().bytes_available < 0) GTEST_SKIP() << "no /proc/meminfo here";
  // Two ranks of a pebibyte each: checked although the world is small.
  LaunchOptions options;
  options.bytes_per_rank = std::int64_t{1} << 50;
  bool ran = false;
  try {
    launch(2, options, [&](Comm&) { ran = true; });
    ADD_FAILURE() << "two ranks of 1 PiB each were not refused";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("a world of 2 rank threads needs about 2.0 PiB"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("of which 1.0 PiB its data"));
  }
  EXPECT_FALSE(ran);
  options.bytes_per_rank = -1;
  try {
    launch_collecting(2, options, [&](Comm&) { ran = true; });
    ADD_FAILURE() << "bytes_per_rank -1 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("bytes per rank -1 must be >= 0"));
  }
  EXPECT_FALSE(ran);
}

// A rank that runs out of memory anyway (the estimate is an estimate) fails
// with OutOfMemory naming the rank, the world and the estimate, not a bare
// std::bad_alloc. The rank throws it itself: no test allocates for real.
TEST(WorldFitTest, ARanksBadAllocIsOutOfMemoryNamingTheRankTheWorldAndTheEstimate) {
  for (const RankMode mode : {RankMode::kThreads, RankMode::kFibers}) {
    SCOPED_TRACE(mode == RankMode::kThreads ? "threads" : "fibers");
    LaunchOptions options;
    options.rank_mode = mode;
    options.bytes_per_rank = 3 << 20;
    const auto run_out = [](Comm& comm) {
      if (comm.rank() == 1) throw std::bad_alloc();
      comm.barrier();
    };
    try {
      launch(3, options, run_out);
      ADD_FAILURE() << "the bad_alloc was lost";
    } catch (const OutOfMemory& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.rank(), 1);
      EXPECT_THAT(what, HasSubstr("rank 1: out of memory (std::bad_alloc) in a world of 3 rank"));
      EXPECT_THAT(what, HasSubstr(mode == RankMode::kThreads ? "rank threads" : "rank fibers"));
      EXPECT_THAT(what, ContainsRegex("estimated at [0-9.]+ MiB"));
      EXPECT_THAT(what, HasSubstr("of which 3.0 MiB the data each rank said it holds"));
    }
    // Without a declaration the message says what was not given.
    options.bytes_per_rank = 0;
    const Report report = launch_collecting(3, options, run_out);
    ASSERT_FALSE(report.errors.empty());
    EXPECT_EQ(report.errors[0].kind, "OutOfMemory");
    EXPECT_THAT(report.errors[0].message, HasSubstr("LaunchOptions::bytes_per_rank"));
    EXPECT_THAT(report.errors[0].message, HasSubstr("was not given"));
  }
}

TEST(WorldFitTest, TheLimitsAStackFailureCanComeFromAreNamed) {
  MachineRoom room;
  EXPECT_EQ(stack_limits_hint(room), "the machine's limits");
  room.address_space_left = 2LL << 20;
  room.memory_maps_left = 10;
  EXPECT_EQ(stack_limits_hint(room),
            "the address-space limit (`ulimit -v`, 2.0 MiB left) or vm.max_map_count (10 maps "
            "left)");
}

}  // namespace
}  // namespace dtw
