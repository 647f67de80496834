// A cycle of blocking calls on specific peers is a deadlock the moment it
// closes, whatever the other ranks do: the threads backend reports it then,
// not when the last bystander returns or blocks (issue 29). Each test runs in
// both rank modes; in fiber mode every rank has a worker of its own, so a
// bystander that computes (here: waits on a flag without a Comm call) holds up
// no one but itself.
//
// Robust against a slow machine: a bystander computes until the test releases
// it, which the cycle's ranks do when their DeadlockError arrives, or until a
// generous limit passes. A detector that waits for the bystander therefore
// shows as a DeadlockError after that limit (and a failed time check), never
// as a hang; a detected cycle takes milliseconds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dtw/dtw.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// How long a bystander computes when no one releases it: what the detector
// would have needed before (issue 29), and far above what a closed cycle needs.
constexpr auto kBystanderLimit = std::chrono::seconds(3);
// The detector must answer well before the bystander's limit.
constexpr double kPromptSeconds = 1.0;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
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

// A world in one rank mode; in fiber mode one worker per rank (up to 8), so
// a bystander that never calls Comm holds up no other rank.
class DeadlockCycleTest : public ::testing::TestWithParam<RankMode> {
 protected:
  DeadlockCycleTest() : workers_("DTW_FIBER_WORKERS", "8") {}
  LaunchOptions options() const {
    LaunchOptions o;
    o.rank_mode = GetParam();
    o.timeout = std::chrono::seconds(20);  // a per-call limit no test here should reach
    return o;
  }

  // A rank computing (no Comm call) until released or past kBystanderLimit.
  void compute_until_released() {
    const Clock::time_point until = Clock::now() + kBystanderLimit;
    while (!released_.load() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Called by a rank of the cycle when its DeadlockError arrives.
  void caught(Clock::time_point start) {
    double expected = -1;
    caught_after_.compare_exchange_strong(expected, seconds_since(start));
    released_ = true;
  }

  std::atomic<bool> released_{false};
  std::atomic<double> caught_after_{-1};

 private:
  ScopedEnv workers_;
};

const RankError* error_of(const Report& report, int rank) {
  for (const RankError& e : report.errors)
    if (e.rank == rank) return &e;
  return nullptr;
}

TEST_P(DeadlockCycleTest, TwoRanksWaitingOnEachOtherAreCaughtWhileAThirdComputes) {
  const Clock::time_point start = Clock::now();
  const Report report = launch_collecting(3, options(), [&](Comm& comm) {
    if (comm.rank() == 2) return compute_until_released();
    std::vector<double> in(16);
    try {
      comm.recv(in, 1 - comm.rank(), 7);  // both receive first: unsafe
    } catch (const DeadlockError&) {
      caught(start);
      throw;
    }
  });
  ASSERT_GE(caught_after_.load(), 0.0) << "no DeadlockError reached ranks 0 and 1";
  EXPECT_LT(caught_after_.load(), kPromptSeconds)
      << "the cycle was reported only after the bystander stopped computing";
  ASSERT_EQ(report.errors.size(), 2u);
  EXPECT_EQ(error_of(report, 2), nullptr) << "the bystander failed: " << report.errors.back().message;
  for (int r : {0, 1}) {
    const RankError* e = error_of(report, r);
    ASSERT_NE(e, nullptr) << "rank " << r;
    EXPECT_EQ(e->kind, "DeadlockError");
    EXPECT_THAT(e->message, HasSubstr("deadlock: a cycle of blocking calls has closed"));
    EXPECT_THAT(e->message, HasSubstr("cycle: rank 0 -> rank 1 -> rank 0"));
    EXPECT_THAT(e->message, HasSubstr("rank   0  in recv, waiting"));
    EXPECT_THAT(e->message, HasSubstr("recv from rank 1, tag 7, 128 B (16 float64)"));
    EXPECT_THAT(e->message, HasSubstr("recv from rank 0, tag 7, 128 B (16 float64)"));
    EXPECT_THAT(e->message, HasSubstr("rank   2  running"));
  }
}

TEST_P(DeadlockCycleTest, AThreeRankCycleAmongFiveIsCaughtWhileTheOthersCompute) {
  const Clock::time_point start = Clock::now();
  const Report report = launch_collecting(5, options(), [&](Comm& comm) {
    const int r = comm.rank();
    if (r >= 3) return compute_until_released();
    std::vector<float> buf(4);
    try {
      // 0 waits on 1, 1 on 2, 2 on 0: receives and a synchronous send.
      if (r == 0) comm.recv(buf, 1, 3);
      if (r == 1) comm.recv(buf, 2, 3);
      if (r == 2) comm.send(buf, 0, 3);
    } catch (const DeadlockError&) {
      caught(start);
      throw;
    }
  });
  ASSERT_GE(caught_after_.load(), 0.0) << "no DeadlockError reached the cycle";
  EXPECT_LT(caught_after_.load(), kPromptSeconds)
      << "the cycle was reported only after the bystanders stopped computing";
  ASSERT_EQ(report.errors.size(), 3u);
  for (const RankError& e : report.errors) {
    EXPECT_LT(e.rank, 3);
    EXPECT_EQ(e.kind, "DeadlockError");
    EXPECT_THAT(e.message, HasSubstr("cycle: rank 0 -> rank 1 -> rank 2 -> rank 0"));
    EXPECT_THAT(e.message, HasSubstr("send to rank 0, tag 3, 16 B (4 float32)"));
    EXPECT_THAT(e.message, HasSubstr("rank   3  running"));
  }
}

TEST_P(DeadlockCycleTest, AChainEndingInAComputingRankIsNoDeadlock) {
  // 0 waits on 1, 1 on 2, and 2 computes before it answers: every link of the
  // chain is a blocking call on a specific peer, but the chain is no cycle.
  // Ranks 3 and 4 receive what the other already sent: a message posted
  // before the wait satisfies it.
  const Report report = launch_collecting(5, options(), [&](Comm& comm) {
    const int r = comm.rank();
    std::vector<std::int32_t> buf(8, r);
    if (r == 0) comm.recv(buf, 1, 1);
    if (r == 1) {
      comm.recv(buf, 2, 1);
      comm.send(buf, 0, 1);
    }
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.send(buf, 1, 1);
    }
    if (r >= 3) {
      const std::vector<std::int32_t> mine(8, r);
      Request out = comm.isend(mine, 7 - r, 2);
      comm.recv(buf, 7 - r, 2);
      comm.wait(out);
    }
  });
  EXPECT_TRUE(report.ok()) << report.errors.front().message;
}

TEST_P(DeadlockCycleTest, ExchangesThatNeverDeadlockAreNeverReported) {
  // Races between a cycle's closing and its breaking: each round, every rank
  // exchanges with both ring neighbours in an order that is safe but makes
  // chains of waits on specific peers come and go.
  const Report report = launch_collecting(6, options(), [&](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    std::int64_t out = r, in = -1;
    for (int round = 0; round < 200; ++round) {
      if (r % 2 == 0) {
        comm.send(std::span<const std::int64_t>(&out, 1), right, 0);
        comm.recv(std::span<std::int64_t>(&in, 1), left, 0);
      } else {
        comm.recv(std::span<std::int64_t>(&in, 1), left, 0);
        comm.send(std::span<const std::int64_t>(&out, 1), right, 0);
      }
      if (in != left) throw Error("the ring delivered the wrong value");
    }
  });
  EXPECT_TRUE(report.ok()) << report.errors.front().message;
}

INSTANTIATE_TEST_SUITE_P(Modes, DeadlockCycleTest,
                         ::testing::Values(RankMode::kThreads, RankMode::kFibers),
                         [](const auto& mode) {
                           return mode.param == RankMode::kThreads ? "Threads" : "Fibers";
                         });

}  // namespace
}  // namespace dtw
