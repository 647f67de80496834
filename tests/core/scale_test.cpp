// The threads backend at scale: worlds of thousands of rank threads work, and
// a failure in one of them gives one report whose length does not grow with
// the world. Correctness only; the timings are in bench/ and docs/results/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtw/dtw.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Sets an environment variable for one scope (nullptr: unsets it), restoring
// what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::size_t count_of(const Report& report, const std::string& kind) {
  return static_cast<std::size_t>(std::count_if(report.errors.begin(), report.errors.end(),
                                                [&](const RankError& e) { return e.kind == kind; }));
}

TEST(ScaleTest, TokenRingOfTwoThousandRanks) {
  constexpr int p = 2048;
  std::vector<std::int64_t> got(p, -1);
  launch(p, [&](Comm& comm) {
    const int r = comm.rank();
    std::int64_t token = 0;
    if (r == 0) {
      token = 1;
      comm.send(std::span<const std::int64_t>(&token, 1), 1);
      comm.recv(std::span<std::int64_t>(&token, 1), p - 1);
    } else {
      comm.recv(std::span<std::int64_t>(&token, 1), r - 1);
      token += 1;
      comm.send(std::span<const std::int64_t>(&token, 1), (r + 1) % p);
    }
    got[static_cast<std::size_t>(r)] = token;
  });
  for (int r = 0; r < p; ++r) ASSERT_EQ(got[static_cast<std::size_t>(r)], r == 0 ? p : r + 1) << r;
}

TEST(ScaleTest, DeadlockOfAThousandRanksIsOneShortReport) {
  constexpr int p = 1024;
  // Every rank receives from its left neighbour first: one cycle through all,
  // each rank waiting for the one on its left.
  const Report report = launch_collecting(p, {}, [](Comm& comm) {
    std::int64_t x = 0;
    comm.recv(std::span<std::int64_t>(&x, 1), (comm.rank() + p - 1) % p, 3);
    comm.send(std::span<const std::int64_t>(&x, 1), (comm.rank() + 1) % p, 3);
  });
  ASSERT_EQ(count_of(report, "DeadlockError"), static_cast<std::size_t>(p));
  const std::string& what = report.errors.front().message;
  EXPECT_LT(lines_of(what), 40u) << what;
  EXPECT_THAT(what, HasSubstr("cycle of 1024 ranks: rank 0 -> rank 1023 -> rank 1022 -> "));
  EXPECT_THAT(what, HasSubstr("-> rank 2 -> rank 1 -> rank 0\n"));
  EXPECT_THAT(what, HasSubstr("rank   0  in recv, waiting"));
  EXPECT_THAT(what, HasSubstr("recv from rank 1023, tag 3, 8 B (1 int64)"));
  EXPECT_THAT(what, HasSubstr("the other 1008 rank(s):"));
  EXPECT_THAT(what, HasSubstr(" 1008 in recv: ranks 1-1008"));
}

TEST(ScaleTest, ManyCyclesAreAllCountedAndTheFirstNamed) {
  constexpr int p = 64;
  // Pairs (0,1), (2,3), ... each wait for any one of two sends to the other,
  // which nothing receives: 32 cycles of two. A wait for any one of several
  // operations is no wait on a specific peer, so the cycle check leaves these
  // to the world-wide check, which sees them all when the last rank blocks.
  // (Blocking sends would be reported as the first pair closes, that pair
  // alone: tests/core/deadlock_cycle_test.cpp.)
  const Report report = launch_collecting(p, {}, [](Comm& comm) {
    const std::vector<float> a(4, 1.0f), b(4, 2.0f);
    std::vector<Request> sends;
    sends.push_back(comm.isend(a, comm.rank() ^ 1, 0));
    sends.push_back(comm.isend(b, comm.rank() ^ 1, 1));
    comm.wait_any(sends);
  });
  ASSERT_FALSE(report.errors.empty());
  const std::string& what = report.errors.front().message;
  EXPECT_THAT(what, HasSubstr("cycle: rank 0 -> rank 1 -> rank 0\n"));
  EXPECT_THAT(what, HasSubstr("cycle: rank 14 -> rank 15 -> rank 14\n"));
  EXPECT_THAT(what, HasSubstr("... and 24 more cycle(s)"));
  EXPECT_THAT(what, HasSubstr("(32 disjoint cycles)"));
  // 16 ranks in full, two operations each, whatever the world's size.
  EXPECT_LT(lines_of(what), 70u) << what;
}

TEST(ScaleTest, DeadlockInSplitGroupsNamesGroupAndWorldRanksAndEveryCycle) {
  // Two groups, {0, 2} and {1, 3}; in each, both members wait for any one of
  // two sends to the other (so that the world-wide check reports both cycles
  // at once, as above).
  const Report report = launch_collecting(4, {}, [](Comm& comm) {
    auto group = comm.split(comm.rank() % 2, comm.rank());
    const std::vector<float> a(2, 1.0f), b(2, 2.0f);
    std::vector<Request> sends;
    sends.push_back(group->isend(a, 1 - group->rank(), 9));
    sends.push_back(group->isend(b, 1 - group->rank(), 10));
    group->wait_any(sends);
  });
  ASSERT_FALSE(report.errors.empty());
  const std::string& what = report.errors.front().message;
  EXPECT_THAT(what, HasSubstr("cycle: rank 0 (world 0) -> rank 1 (world 2) -> rank 0 (world 0)"));
  EXPECT_THAT(what, HasSubstr("cycle: rank 0 (world 1) -> rank 1 (world 3) -> rank 0 (world 1)"));
  EXPECT_THAT(what, HasSubstr("send to rank 1 of its group (world rank 2), tag 9"));
  EXPECT_THAT(what, HasSubstr("send to rank 0 of its group (world rank 1), tag 9"));
}

// Every rank but 0 waits for rank 0, which stays busy until the launch fails:
// the first waiting rank past the timeout fails it, alone. Rank 0 must never
// look blocked or stuck polling itself, whatever the scheduling: it polls a
// receive that never completes (on fibers, that hands its worker to the
// waiting ranks, so one worker is enough) and sends itself a message each
// round (a completion: its own poll clock restarts). It ends in an
// AbortedError when the timeout fails the launch; no sleep decides anything.
Report busy_rank_zero_while_the_others_wait(int p, RankMode mode) {
  LaunchOptions options;
  options.timeout = std::chrono::milliseconds(300);
  options.rank_mode = mode;
  return launch_collecting(p, options, [](Comm& comm) {
    std::int64_t x = 0;
    if (comm.rank() == 0) {
      std::int64_t never = 0, out = 1, in = 0;
      Request forever = comm.irecv(std::span<std::int64_t>(&never, 1), 1, 2);  // rank 1 never sends
      for (;;) {
        (void)comm.test(forever);
        comm.sendrecv(std::span<const std::int64_t>(&out, 1), 0, std::span<std::int64_t>(&in, 1),
                      0, 3);
      }
    }
    comm.recv(std::span<std::int64_t>(&x, 1), 0, 1);
  });
}

TEST(ScaleTest, ATimeoutIsReportedOnceForTheWholeWorld) {
  constexpr int p = 256;
  const std::pair<RankMode, const char*> modes[] = {
      {RankMode::kThreads, nullptr}, {RankMode::kFibers, "1"}, {RankMode::kFibers, "2"}};
  for (const auto& [mode, workers] : modes) {
    SCOPED_TRACE(mode == RankMode::kThreads ? std::string("threads")
                                            : std::string("fibers on ") + workers + " worker(s)");
    const ScopedEnv env("DTW_FIBER_WORKERS", workers);
    const Report report = busy_rank_zero_while_the_others_wait(p, mode);
    EXPECT_EQ(count_of(report, "TimeoutError"), 1u);
    // Every rank but the one that timed out, rank 0 included.
    EXPECT_EQ(count_of(report, "AbortedError"), static_cast<std::size_t>(p - 1));
    EXPECT_EQ(report.errors.size(), static_cast<std::size_t>(p));
    for (const RankError& e : report.errors) {
      if (e.kind == "TimeoutError") {
        EXPECT_NE(e.rank, 0);
        EXPECT_LT(lines_of(e.message), 40u) << e.message;
        EXPECT_THAT(e.message, HasSubstr("rank   0  running"));
      } else {
        EXPECT_THAT(e.message, HasSubstr("failed first (TimeoutError)"));
      }
    }
  }
}

TEST(ScaleTest, TablesOfALargeWorldAreSummaries) {
  constexpr int p = 300;
  const Report report = launch(p, [](Comm& comm) {
    std::vector<float> v(static_cast<std::size_t>(comm.rank() + 1), 1.0f), in(p);
    comm.sendrecv(std::span<const float>(v), (comm.rank() + 1) % p,
                  std::span<float>(in.data(), static_cast<std::size_t>((comm.rank() + p - 1) % p + 1)),
                  (comm.rank() + p - 1) % p);
  });
  const std::string traffic = report.traffic_table();
  EXPECT_LT(lines_of(traffic), 16u) << traffic;
  EXPECT_THAT(traffic, HasSubstr("300 ranks:"));
  EXPECT_THAT(traffic, HasSubstr("in 300 messages over 300 of 89700 links"));
  EXPECT_THAT(traffic, HasSubstr("least 4 B (rank 0), median"));
  EXPECT_THAT(traffic, HasSubstr("most 1.2 KiB (rank 299)"));
  EXPECT_THAT(traffic, HasSubstr("  299 -> 0     "));  // the busiest link first
  const std::string memory = report.memory_table();
  EXPECT_LT(lines_of(memory), 20u) << memory;
  EXPECT_THAT(memory, HasSubstr("285 more rank(s)"));
}

}  // namespace
}  // namespace dtw
