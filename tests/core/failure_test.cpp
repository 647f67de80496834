// Failure handling: deadlock reports, timeouts, errors crossing ranks, requests
// left pending or dropped. Each test also bounds how long the failure takes to surface.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::launch_bounded;
using testing::launch_collecting_bounded;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const RankError* error_of(const Report& report, int rank) {
  for (const RankError& e : report.errors)
    if (e.rank == rank) return &e;
  return nullptr;
}

// An empty std::function was called on every rank: "uncaught std::exception:
// bad_function_call" (issue 29). It is refused, saying so, before any rank runs.
TEST(FailureTest, AnEmptyRankFunctionIsRefusedBeforeAnyRankRuns) {
  for (const int world : {1, 3}) {
    try {
      launch(world, RankFunction{});
      ADD_FAILURE() << "an empty rank function was launched on " << world << " rank(s)";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("the rank function is empty"));
      EXPECT_EQ(e.rank(), -1) << "raised on a rank: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not InvalidArgument: " << e.what();
    }
  }
  EXPECT_THROW(launch_collecting(2, {}, RankFunction{}), InvalidArgument);
}

TEST(FailureTest, TwoRankSendCycleIsReported) {
  const auto start = Clock::now();
  try {
    launch_bounded(2, [](Comm& comm) {
      const std::vector<float> out(1024, 1.0f);
      comm.send(out, 1 - comm.rank(), 5);  // both send first: unsafe
      std::vector<float> in(1024);
      comm.recv(in, 1 - comm.rank(), 5);
    });
    ADD_FAILURE() << "no deadlock reported";
  } catch (const DeadlockError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("deadlock"));
    EXPECT_THAT(what, HasSubstr("rank   0  in send"));
    EXPECT_THAT(what, HasSubstr("rank   1  in send"));
    EXPECT_THAT(what, HasSubstr("send to rank 1, tag 5, 4.0 KiB (1024 float32)"));
    EXPECT_THAT(what, HasSubstr("send to rank 0, tag 5, 4.0 KiB (1024 float32)"));
    EXPECT_THAT(what, HasSubstr("cycle: rank 0 -> rank 1 -> rank 0"));
  }
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(FailureTest, ThreeRankCycleIsReported) {
  const auto start = Clock::now();
  const Report report = launch_collecting(3, {}, [](Comm& comm) {
    std::vector<std::int64_t> in(3);
    // Each rank receives from its right neighbour before sending to its left one.
    comm.recv(in, (comm.rank() + 1) % 3, 2);
    comm.send(in, (comm.rank() + 2) % 3, 2);
  });
  EXPECT_LT(seconds_since(start), 2.0);
  ASSERT_EQ(report.errors.size(), 3u);
  for (const RankError& e : report.errors) {
    EXPECT_EQ(e.kind, "DeadlockError");
    EXPECT_THAT(e.message, HasSubstr("rank   0  in recv,"));
    EXPECT_THAT(e.message, HasSubstr("recv from rank 1, tag 2, 24 B (3 int64)"));
    EXPECT_THAT(e.message, HasSubstr("recv from rank 2, tag 2"));
    EXPECT_THAT(e.message, HasSubstr("recv from rank 0, tag 2"));
    EXPECT_THAT(e.message, HasSubstr("cycle: rank 0 -> rank 1 -> rank 2 -> rank 0"));
  }
}

TEST(FailureTest, BlockingSelfSendDeadlocks) {
  EXPECT_THROW(launch_bounded(1, [](Comm& comm) {
                 comm.send(std::vector<float>(1), 0, 0);
               }),
               DeadlockError);
}

TEST(FailureTest, WaitingOnAReturnedRankIsReported) {
  const auto start = Clock::now();
  try {
    launch_bounded(2, [](Comm& comm) {
      std::vector<double> in(1);
      if (comm.rank() == 0) comm.recv(in, 1, 0);
    });
    ADD_FAILURE() << "no deadlock reported";
  } catch (const DeadlockError& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank   1  finished"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 0 waits for rank 1, which has returned"));
  }
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(FailureTest, PeerThatNeverArrivesTimesOut) {
  std::atomic<double> failed_after{-1};
  LaunchOptions options;
  options.timeout = std::chrono::milliseconds(200);
  const auto start = Clock::now();
  const Report report = launch_collecting(2, options, [&](Comm& comm) {
    std::vector<float> buf(4);
    if (comm.rank() == 1) {
      // Busy outside dtw: not blocked, so this is no deadlock, only a slow peer.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      comm.send(buf, 0, 0);
    } else {
      try {
        comm.recv(buf, 1, 0);
      } catch (const TimeoutError&) {
        failed_after = seconds_since(start);
        throw;
      }
    }
  });
  EXPECT_GE(failed_after.load(), 0.19);
  EXPECT_LT(failed_after.load(), 0.9);
  const RankError* e0 = error_of(report, 0);
  ASSERT_NE(e0, nullptr);
  EXPECT_EQ(e0->kind, "TimeoutError");
  EXPECT_THAT(e0->message, HasSubstr("timeout"));
  EXPECT_THAT(e0->message, HasSubstr("rank   0  in recv,"));
  EXPECT_THAT(e0->message, HasSubstr("recv from rank 1, tag 0"));
  EXPECT_THAT(e0->message, HasSubstr("rank   1  running"));
  const RankError* e1 = error_of(report, 1);
  ASSERT_NE(e1, nullptr);
  EXPECT_EQ(e1->kind, "AbortedError");
}

TEST(FailureTest, RankErrorAbortsOthersPromptly) {
  std::atomic<double> thrown_at{-1}, aborted_at[2] = {-1, -1};
  const auto start = Clock::now();
  try {
    launch_bounded(3, [&](Comm& comm) {
      std::vector<float> in(8);
      if (comm.rank() == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        thrown_at = seconds_since(start);
        DTW_CHECK_ARG(false, "custom failure " << 17);
      }
      try {
        comm.recv(in, 2, 0);
      } catch (const AbortedError& e) {
        aborted_at[comm.rank()] = seconds_since(start);
        EXPECT_THAT(std::string(e.what()), HasSubstr("rank 2 failed first (InvalidArgument)"));
        throw;
      }
    });
    ADD_FAILURE() << "launch did not rethrow";
  } catch (const InvalidArgument& e) {  // the original error, type kept
    EXPECT_EQ(e.rank(), 2);
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 2: custom failure 17"));
  }
  for (int r : {0, 1}) {
    EXPECT_GE(aborted_at[r].load(), thrown_at.load()) << "rank " << r;
    EXPECT_LT(aborted_at[r].load() - thrown_at.load(), 0.5) << "rank " << r;
  }
}

TEST(FailureTest, CollectingListsEveryRankError) {
  const Report report = launch_collecting(4, {}, [](Comm& comm) {
    if (comm.rank() == 1) throw std::runtime_error("boom");
    std::vector<float> in(1);
    comm.recv(in, 1, 0);
  });
  ASSERT_EQ(report.errors.size(), 4u);
  EXPECT_FALSE(report.ok());
  const RankError* e1 = error_of(report, 1);
  ASSERT_NE(e1, nullptr);
  EXPECT_EQ(e1->kind, "Error");
  EXPECT_THAT(e1->message, HasSubstr("rank 1: uncaught std::exception: boom"));
  for (int r : {0, 2, 3}) {
    const RankError* e = error_of(report, r);
    ASSERT_NE(e, nullptr) << "rank " << r;
    EXPECT_EQ(e->kind, "AbortedError");
  }
}

// A loop of cases in one launch, as chapter 01's sweeps run: in case 2 rank 0
// receives from rank 1 twice instead of from 1 and 2. Rank 1 runs on into
// case 3 and blocks there; ranks 0 and 2 stay in case 2. Whichever rank's
// error the launch reports, its context is the stuck case (case 2), not the
// case a rank that moved on was in (a learner read "root 0" for a broadcast
// stuck at root 2).
TEST(FailureTest, ADeadlockNamesTheCaseOfTheRankBehind) {
  const Report report = launch_collecting_bounded(3, {}, [](Comm& comm) {
    std::vector<int> v(1, comm.rank());
    for (int k = 0; k < 4; ++k) {
      DTW_TRACE("case " << k);
      if (comm.rank() == 0) {
        comm.recv(v, 1, k);
        comm.recv(v, k == 2 ? 1 : 2, k);
      } else {
        comm.send(v, 0, k);
      }
    }
  });
  ASSERT_EQ(report.errors.size(), 3u) << "every rank is stuck";
  for (const RankError& e : report.errors) {
    EXPECT_EQ(e.kind, "DeadlockError") << e.message;
    EXPECT_THAT(e.message, HasSubstr("while: case 2")) << "rank " << e.rank;
    EXPECT_THAT(e.message, Not(HasSubstr("while: case 3"))) << "rank " << e.rank;
  }
}

TEST(FailureTest, FirstRealErrorWinsOverAborts) {
  try {
    launch_bounded(5, [](Comm& comm) {
      if (comm.rank() == 3) throw NotImplemented("01.4: ring step");
      comm.barrier();
    });
    ADD_FAILURE() << "no error";
  } catch (const NotImplemented& e) {
    EXPECT_EQ(e.rank(), 3);
  }
}

TEST(FailureTest, ReturningWithPendingRequestIsReported) {
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    static std::vector<float> out(6);  // outlives the launch: only the report matters
    if (comm.rank() == 0) {
      Request forgotten = comm.isend(out, 1, 3);
    }
  });
  const RankError* e0 = error_of(report, 0);
  ASSERT_NE(e0, nullptr);
  EXPECT_EQ(e0->kind, "InvalidArgument");
  EXPECT_THAT(e0->message, HasSubstr("never waited for"));
  EXPECT_THAT(e0->message, HasSubstr("isend to rank 1, tag 3, 24 B (6 float32)"));
  EXPECT_EQ(error_of(report, 1), nullptr);
}

TEST(FailureTest, DroppedMatchedSendFailsItsReceiver) {
  std::atomic<bool> dropped{false};
  const Report report = launch_collecting(2, {}, [&](Comm& comm) {
    std::vector<float> big(1 << 18);  // 1 MiB: copied by the receiver, later
    if (comm.rank() == 1) {
      Request r = comm.irecv(big, 0, 0);
      comm.barrier();
      while (!dropped.load()) std::this_thread::yield();
      comm.wait(r);
    } else {
      comm.barrier();
      { Request r = comm.isend(big, 1, 0); }  // dropped after matching, before the copy
      dropped = true;
    }
  });
  const RankError* e0 = error_of(report, 0);
  ASSERT_NE(e0, nullptr);
  EXPECT_THAT(e0->message, HasSubstr("never waited for"));
  EXPECT_THAT(e0->message, HasSubstr("Request destroyed before wait"));
  const RankError* e1 = error_of(report, 1);
  ASSERT_NE(e1, nullptr);
  EXPECT_THAT(e1->message, HasSubstr("rank 0 dropped its pending isend to rank 1 (tag 0)"));
}

TEST(FailureTest, ExceptionWithPendingReceiveLeavesNoDanglingBuffer) {
  // Rank 0 throws while its irecv is posted; the buffer dies during unwinding.
  // Rank 1's send must not write into it (ASan/TSan builds would see it).
  // The token orders the two without a clock: rank 1 sends only once the
  // irecv is posted, so its send either matches it (and rank 0 throws before
  // it copies) or arrives after rank 0 failed; it fails either way.
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    std::int32_t token = 0;
    if (comm.rank() == 0) {
      auto in = std::make_unique<std::vector<float>>(1 << 16);
      Request r = comm.irecv(*in, 1, 0);
      comm.send(std::span<const std::int32_t>(&token, 1), 1, 1);
      throw InvalidArgument("gave up");
    }
    comm.recv(std::span<std::int32_t>(&token, 1), 0, 1);
    comm.send(std::vector<float>(1 << 16, 1.0f), 0, 0);
  });
  ASSERT_EQ(report.errors.size(), 2u);
  EXPECT_EQ(error_of(report, 0)->kind, "InvalidArgument");
  EXPECT_THAT(error_of(report, 0)->message, ::testing::Not(HasSubstr("never waited")));
  EXPECT_EQ(error_of(report, 1)->kind, "AbortedError");
}

TEST(FailureTest, DeadlockCaughtInsideRankLetsLaunchSucceed) {
  // Chapter 00 shows the detector to the learner by catching its error.
  std::atomic<int> caught{0};
  const Report report = launch_bounded(2, [&](Comm& comm) {
    try {
      comm.send(std::vector<float>(1), 1 - comm.rank(), 0);
    } catch (const DeadlockError&) {
      ++caught;
    }
  });
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(caught.load(), 2);
}

}  // namespace
}  // namespace dtw
