// Completion without blocking: Comm::test, wait_any and wait_some, the
// deadlock detector through a rank blocked in wait_any, and their bad input.
#include <gmock/gmock.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using testing::launch_bounded;

TEST(CompletionTest, ServerServesSevenWorkersInTheOrderTheySend) {
  // Workers send in the scripted order below, not in rank order: worker
  // order[i] sends only after order[i-1] has been served (the server
  // acknowledges each job, and the served worker passes a token on). So at
  // any moment exactly one of the server's seven receives can complete, and
  // wait_any must return that one; one that waited for its requests in index
  // order would wait for worker 1 while worker 4 waits for its acknowledgment
  // (a deadlock, reported). No sleeps: the order does not depend on how a
  // loaded machine schedules threads (60 ms apart was not enough).
  const std::vector<int> order = {4, 1, 6, 2, 7, 3, 5};
  launch_bounded(8, [&](Comm& comm) {
    std::vector<std::int32_t> token(1);
    if (comm.rank() != 0) {
      const auto position = std::find(order.begin(), order.end(), comm.rank()) - order.begin();
      if (position > 0) comm.recv(token, order[position - 1], 4);
      const std::vector<std::int64_t> job{comm.rank(), 100 * comm.rank()};
      comm.send(job, 0, 3);
      comm.recv(token, 0, 7);  // served
      if (position + 1 < static_cast<std::ptrdiff_t>(order.size()))
        comm.send(token, order[position + 1], 4);
      return;
    }
    std::vector<std::vector<std::int64_t>> jobs(7, std::vector<std::int64_t>(2));
    std::vector<Request> pending;
    for (int w = 1; w < 8; ++w) pending.push_back(comm.irecv(jobs[w - 1], w, 3));
    std::vector<int> served;
    for (int k = 0; k < 7; ++k) {
      const std::size_t i = comm.wait_any(pending);
      ASSERT_LT(i, pending.size());
      EXPECT_FALSE(pending[i].pending());
      EXPECT_EQ(jobs[i], (std::vector<std::int64_t>{static_cast<std::int64_t>(i) + 1, 100 * (static_cast<std::int64_t>(i) + 1)}));
      served.push_back(static_cast<int>(i) + 1);
      comm.send(token, static_cast<int>(i) + 1, 7);
    }
    EXPECT_EQ(served, order);
    EXPECT_EQ(comm.wait_any(pending), pending.size());  // nothing left pending
  });
}

TEST(CompletionTest, TestPollsToCompletion) {
  // A small message and one past the threads backend's eager limit, whose
  // copy the receiver makes inside its own test(). The sender waits for the
  // receiver's go, sent after its first test(), so that test cannot succeed
  // whatever the scheduler does (a sleep could not promise it under load),
  // on threads and in the MPI twin alike.
  for (const std::size_t n : {std::size_t{3}, std::size_t{1} << 18}) {
    launch_bounded(2, [n](Comm& comm) {
      std::vector<float> data(n, static_cast<float>(comm.rank() + 1));
      std::vector<int> go(1, 0);
      if (comm.rank() == 1) {
        comm.recv(go, 0, 10);
        comm.send(data, 0, 9);
        return;
      }
      Request r = comm.irecv(data, 1, 9);
      EXPECT_FALSE(comm.test(r)) << "nothing was sent before the first test";
      comm.send(go, 1, 10);
      while (!comm.test(r)) std::this_thread::sleep_for(std::chrono::microseconds(200));
      EXPECT_FALSE(r.pending());
      EXPECT_EQ(r.received_count(), static_cast<std::int64_t>(n));
      EXPECT_EQ(data, std::vector<float>(n, 2.0f));
      EXPECT_TRUE(comm.test(r));  // completed: stays true
      Request empty;
      EXPECT_TRUE(comm.test(empty));
      EXPECT_EQ(comm.traffic().messages_received_from(1), 1);  // counted once
    });
  }
}

TEST(CompletionTest, WaitAnyOnEmptyAndCompletedSets) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<Request> none;
    EXPECT_EQ(comm.wait_any(none), 0u);
    EXPECT_TRUE(comm.wait_some(none).empty());
    const int peer = 1 - comm.rank();
    std::vector<std::int32_t> out{comm.rank()}, in(1);
    std::vector<Request> both;
    both.push_back(comm.irecv(in, peer, 1));
    both.push_back(comm.isend(out, peer, 1));
    comm.wait_all(both);
    EXPECT_EQ(comm.wait_any(both), both.size());  // all completed already: none pending
    EXPECT_TRUE(comm.wait_some(both).empty());
    // One completed, one pending: wait_any skips the completed one.
    std::vector<std::int32_t> in2(1);
    both[0] = comm.irecv(in2, peer, 2);
    comm.send(out, peer, 2);  // peer posted its irecv first, so this cannot block forever
    EXPECT_EQ(comm.wait_any(both), 0u);
    EXPECT_EQ(in2[0], peer);
  });
}

TEST(CompletionTest, WaitSomeCompletesEveryRequestExactlyOnce) {
  launch_bounded(4, [](Comm& comm) {
    if (comm.rank() != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * comm.rank()));
      comm.send(std::vector<std::int64_t>{comm.rank()}, 0);
      return;
    }
    std::vector<std::vector<std::int64_t>> got(3, std::vector<std::int64_t>(1));
    std::vector<Request> reqs;
    for (int w = 1; w < 4; ++w) reqs.push_back(comm.irecv(got[w - 1], w));
    std::multiset<std::size_t> seen;
    while (seen.size() < 3) {
      const std::vector<std::size_t> some = comm.wait_some(reqs);
      ASSERT_FALSE(some.empty());
      EXPECT_TRUE(std::is_sorted(some.begin(), some.end()));
      seen.insert(some.begin(), some.end());
    }
    EXPECT_EQ(seen, (std::multiset<std::size_t>{0, 1, 2}));
    for (int w = 1; w < 4; ++w) EXPECT_EQ(got[w - 1][0], w);
    EXPECT_EQ(comm.traffic().messages_received_from(1) + comm.traffic().messages_received_from(2) +
                  comm.traffic().messages_received_from(3),
              3);
  });
}

TEST(CompletionTest, WaitAnyReturnsWhileItsOtherPeerIsBlockedOnIt) {
  // Rank 0 waits for either rank; rank 1 is blocked on rank 0, rank 2 sends.
  // Not a deadlock: rank 2's message completes one of rank 0's requests.
  launch_bounded(3, [](Comm& comm) {
    std::vector<std::int32_t> a(1), b(1);
    if (comm.rank() == 0) {
      std::vector<Request> reqs;
      reqs.push_back(comm.irecv(a, 1, 5));
      reqs.push_back(comm.irecv(b, 2, 5));
      EXPECT_EQ(comm.wait_any(reqs), 1u);
      EXPECT_EQ(b[0], 22);
      comm.send(std::vector<std::int32_t>{7}, 1, 6);
      comm.wait(reqs[0]);
      EXPECT_EQ(a[0], 11);
    } else if (comm.rank() == 1) {
      comm.recv(a, 0, 6);
      comm.send(std::vector<std::int32_t>{11}, 0, 5);
    } else {
      comm.send(std::vector<std::int32_t>{22}, 0, 5);
    }
  });
}

TEST(CompletionTest, DeadlockThroughWaitAnyIsReportedWithTheGraph) {
  // Rank 0 waits for any of ranks 1 and 2, and both wait for rank 0: none of
  // rank 0's requests can ever complete.
  const auto start = std::chrono::steady_clock::now();
  const Report report = launch_collecting(3, {}, [](Comm& comm) {
    std::vector<std::int32_t> a(1), b(1);
    if (comm.rank() == 0) {
      std::vector<Request> reqs;
      reqs.push_back(comm.irecv(a, 1, 5));
      reqs.push_back(comm.irecv(b, 2, 5));
      (void)comm.wait_any(reqs);
    } else {
      comm.recv(a, 0, 6);
    }
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
  ASSERT_EQ(report.errors.size(), 3u);
  for (const RankError& e : report.errors) EXPECT_EQ(e.kind, "DeadlockError");
  const std::string& graph = report.errors[0].message;
  EXPECT_THAT(graph, HasSubstr("in wait_any, waiting"));
  EXPECT_THAT(graph, HasSubstr("for any one of:"));
  EXPECT_THAT(graph, HasSubstr("irecv from rank 1, tag 5, 4 B (1 int32)"));
  EXPECT_THAT(graph, HasSubstr("irecv from rank 2, tag 5, 4 B (1 int32)"));
  EXPECT_THAT(graph, HasSubstr("recv from rank 0, tag 6"));
  EXPECT_THAT(graph, HasSubstr("cycle: rank 0 -> rank 1 -> rank 0"));
  std::printf("deadlock through wait_any, reported after %.3f s:\n%s\n", seconds, graph.c_str());
}

TEST(CompletionTest, PollingThatCannotCompleteEndsInTimeout) {
  LaunchOptions options;
  options.timeout = std::chrono::milliseconds(300);
  const Report report = launch_collecting(2, options, [](Comm& comm) {
    std::vector<std::int32_t> x(1);
    if (comm.rank() == 1) return;  // never sends what rank 0 polls for
    Request r = comm.irecv(x, 1, 2);
    while (!comm.test(r)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  ASSERT_FALSE(report.errors.empty());
  const RankError& first = report.errors[0];
  EXPECT_EQ(first.kind, "TimeoutError");
  EXPECT_THAT(first.message, HasSubstr("polled with test longer than the launch timeout"));
  EXPECT_THAT(first.message, HasSubstr("polling with test"));
}

// The other side of the rule: a rank that polls one request for longer than
// the launch timeout, while operations of its own keep completing between
// those polls (a long phase with other traffic, as DDP's buckets), makes
// progress and is never stopped, on any backend (on MPI a poll clock that
// ignored them would have the watchdog abort this test). Each rank's traffic
// is a message to itself, so its progress does not depend on how the machine
// schedules the other rank. Rank 0 polls for 1.5 timeouts, then lets rank 1
// (polling all along) send what rank 0 polls for.
TEST(CompletionTest, LongPollWhileOtherRequestsCompleteIsNeverStopped) {
  LaunchOptions options;
  // Not 1 s: the rank must never be stopped, so a stall of the rank thread
  // on a loaded machine must stay well inside the timeout.
  options.timeout = std::chrono::seconds(2);
  launch_bounded(2, options, [&](Comm& comm) {
    const int me = comm.rank(), peer = 1 - me;
    std::vector<std::int32_t> in(1), out{me}, beat_in(1), beat_out{me};
    const auto start = std::chrono::steady_clock::now();
    const auto phase = options.timeout * 3 / 2;
    Request r = comm.irecv(in, peer, 7);
    bool told = false;
    while (!comm.test(r)) {
      Request beat = comm.irecv(beat_in, me, 8);
      Request sent = comm.isend(beat_out, me, 8);
      while (!comm.test(beat) || !comm.test(sent)) {
      }
      if (me == 0 && !told && std::chrono::steady_clock::now() - start >= phase) {
        comm.send(out, 1, 7);
        told = true;
      }
    }
    if (me == 1) comm.send(out, 0, 7);
    if (me == 0) {
      EXPECT_GE(std::chrono::steady_clock::now() - start, phase);
    }
    EXPECT_EQ(in[0], peer);
  });
}

// Every rank polls a receive the other never sends: each poll is a call, yet
// nothing ever completes. The rank that reaches the launch timeout first fails
// with TimeoutError naming itself, what it polls for and how long; the other
// is cancelled. (On MPI the watchdog does the same: mpi.watchdog_poll.)
TEST(CompletionTest, RanksThatAllPollForeverEndInTimeoutNamingWhatEachPollsFor) {
  LaunchOptions options;
  options.timeout = std::chrono::seconds(1);
  const Report report = launch_collecting(2, options, [](Comm& comm) {
    std::vector<float> x(16);
    Request r = comm.irecv(x, 1 - comm.rank(), comm.rank() == 0 ? 7 : 9);
    while (!comm.test(r)) {
    }
  });
  ASSERT_EQ(report.errors.size(), 2u);
  // Errors are listed by rank; the one that timed out may be either.
  const bool zero_first = report.errors[0].kind == "TimeoutError";
  const RankError& first = report.errors[zero_first ? 0 : 1];
  const RankError& other = report.errors[zero_first ? 1 : 0];
  EXPECT_EQ(first.kind, "TimeoutError");
  EXPECT_EQ(other.kind, "AbortedError");
  const int r = first.rank;
  ASSERT_TRUE(r == 0 || r == 1) << first.rank;
  EXPECT_THAT(first.message, HasSubstr("polled with test longer than the launch timeout"));
  EXPECT_THAT(first.message,
              HasSubstr("rank   " + std::to_string(r) + "  running, polling with test for "));
  EXPECT_THAT(first.message, HasSubstr(r == 0 ? "irecv from rank 1, tag 7, 64 B (16 float32)"
                                              : "irecv from rank 0, tag 9, 64 B (16 float32)"));
  EXPECT_THAT(other.message, HasSubstr("because rank " + std::to_string(r) + " failed first (TimeoutError)"));
}

// One rank polls, the other blocks in a barrier it needs the poller to enter.
// A polling rank is running, not stuck, so this is no deadlock the detector
// may report at once (between polls it might still enter the barrier); the
// launch fails at the timeout, and the report names the poller's receive.
TEST(CompletionTest, PollingRankAndBlockedRankEndInTimeoutNotDeadlock) {
  LaunchOptions options;
  options.timeout = std::chrono::seconds(1);
  const Report report = launch_collecting(2, options, [](Comm& comm) {
    std::vector<float> x(16);
    if (comm.rank() == 1) return comm.barrier();
    Request r = comm.irecv(x, 1, 7);
    while (!comm.test(r)) {
    }
  });
  ASSERT_EQ(report.errors.size(), 2u);
  const bool zero_first = report.errors[0].kind == "TimeoutError";
  const RankError& first = report.errors[zero_first ? 0 : 1];
  EXPECT_EQ(first.kind, "TimeoutError");
  EXPECT_EQ(report.errors[zero_first ? 1 : 0].kind, "AbortedError");
  EXPECT_THAT(first.message, HasSubstr("timeout: a rank "));
  // Whichever rank timed out first, the report shows both.
  EXPECT_THAT(first.message, HasSubstr("rank   1  in barrier, waiting "));
  if (first.rank == 0) {
    EXPECT_THAT(first.message, HasSubstr("rank   0  running, polling with test for "));
    EXPECT_THAT(first.message, HasSubstr("irecv from rank 1, tag 7, 64 B (16 float32)"));
  }
}

TEST(CompletionTest, WaitAnyOnAnotherCommunicatorsRequestIsInvalidArgument) {
  launch_bounded(2, [](Comm& comm) {
    const std::unique_ptr<Comm> other = comm.dup();
    const int peer = 1 - comm.rank();
    std::vector<std::int32_t> in(1), out{comm.rank()};
    std::vector<Request> reqs;
    reqs.push_back(comm.irecv(in, peer, 4));
    reqs.push_back(other->irecv(in, peer, 4));
    try {
      (void)comm.wait_any(reqs);
      ADD_FAILURE() << "wait_any took another communicator's request";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(comm.rank()) +
                                      ": wait_any on request 1 (irecv from rank " +
                                      std::to_string(peer) + ", tag 4), which another "
                                                             "communicator started"));
    }
    EXPECT_THROW(comm.wait(reqs[1]), InvalidArgument);
    // Both complete on their own communicators.
    comm.send(out, peer, 4);
    other->send(out, peer, 4);
    comm.wait(reqs[0]);
    other->wait(reqs[1]);
  });
}

TEST(CompletionTest, TestOnAMovedFromRequestIsInvalidArgument) {
  launch_bounded(2, [](Comm& comm) {
    const int peer = 1 - comm.rank();
    std::vector<std::int32_t> in(1), out{comm.rank()};
    Request r = comm.irecv(in, peer);
    Request owner = std::move(r);
    try {
      (void)comm.test(r);
      ADD_FAILURE() << "test on a moved-from request";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("test on request 0, which was moved from"));
    }
    std::vector<Request> two;
    two.push_back(std::move(owner));
    two.push_back(Request());
    EXPECT_THROW((void)comm.wait_any(std::span<Request>(&r, 1)), InvalidArgument);
    EXPECT_THROW(comm.wait(r), InvalidArgument);
    comm.send(out, peer);
    EXPECT_EQ(comm.wait_any(two), 0u);  // an empty (never started) request is simply skipped
    EXPECT_EQ(in[0], peer);
    r = comm.isend(out, peer, 1);  // assigned again: usable
    comm.recv(in, peer, 1);
    comm.wait(r);
  });
}

TEST(CompletionTest, IrecvReduceCombinesTheMessageByCompletion) {
  // Small and past the eager limit; the threads backend fuses the reduction,
  // the others reduce from scratch when the request completes.
  for (const std::size_t n : {std::size_t{5}, std::size_t{1} << 17}) {
    launch_bounded(3, [n](Comm& comm) {
      const int r = comm.rank(), right = (r + 1) % 3, left = (r + 2) % 3;
      std::vector<double> acc(n, 10.0 * r);
      const std::vector<double> mine(n, r + 0.5);
      Request in = comm.irecv_reduce(acc, left, ReduceOp::kSum, 2);
      Request out = comm.isend(mine, right, 2);
      std::vector<Request> both;
      both.push_back(std::move(in));
      both.push_back(std::move(out));
      comm.wait_all(both);
      EXPECT_EQ(acc, std::vector<double>(n, 10.0 * r + left + 0.5));
      EXPECT_EQ(comm.traffic().messages_received_from(left), 1);
      // A message of another size is refused, naming both sizes.
      std::vector<double> small(n - 1, 1.0);
      Request bad = comm.irecv_reduce(acc, left, ReduceOp::kMax, 3);
      Request sent = comm.isend(small, right, 3);
      EXPECT_THROW(comm.wait(bad), InvalidArgument);
      // On threads the match itself fails, so the sender learns of it too; on
      // MPI the send completes and only the receiver finds the size wrong.
      if (std::string(comm.backend()) == "threads") {
        EXPECT_THROW(comm.wait(sent), InvalidArgument);
      } else {
        comm.wait(sent);
      }
    });
  }
}

}  // namespace
}  // namespace dtw
