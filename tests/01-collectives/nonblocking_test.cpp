// Chapter 01's non-blocking collectives (nonblocking.h, solution library
// only): several in flight on one communicator, completed in any order,
// exactly equal to the blocking ring; the in-place allgather of uneven
// chunks; polling with test(); bad input.
#include <gmock/gmock.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "nonblocking.h"
#include "sweep.h"

namespace dtw::ch01 {
namespace {

using ::testing::HasSubstr;

// Two gradient buckets of uneven sizes, posted back to back, completed in
// reverse order: each must equal what the blocking ring allreduce gives
// (bitwise: the same algorithm adds in the same order).
template <class T>
void two_buckets_reverse_order(Comm& comm, ReduceOp op, sweep::Checker& check) {
  const int p = comm.size(), r = comm.rank();
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3} * p + 1,
                               std::int64_t{10007}}) {
    std::vector<T> first = sweep::make_input<T>(r, n, op, 1);
    std::vector<T> second = sweep::make_input<T>(r, n + 5, op, 2);
    std::vector<T> want_first = first, want_second = second;
    allreduce(comm, std::span<T>(want_first), op);
    allreduce(comm, std::span<T>(want_second), op);
    PendingCollective a = iallreduce(comm, std::span<T>(first), op);
    PendingCollective b = iallreduce(comm, std::span<T>(second), op);
    b.wait();
    EXPECT_TRUE(b.done());
    a.wait();
    const std::string what = sweep::describe<T>("two buckets", p, n, static_cast<int>(op));
    check.same(want_first, first, 0, what + ", first");
    check.same(want_second, second, 0, what + ", second");
  }
}

TEST(NonblockingTest, TwoBucketAllreducesCompletedInReverseOrderAreExact) {
  sweep::on_every_world([](Comm& comm) {
    comm.set_verify_collectives(true);
    sweep::Checker check(comm.rank());
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      two_buckets_reverse_order<float>(comm, op, check);
      two_buckets_reverse_order<std::int64_t>(comm, op, check);
    }
    // And against the reference, for the integers (exact whatever the order).
    std::vector<std::int32_t> x = sweep::make_input<std::int32_t>(comm.rank(), 999, ReduceOp::kSum);
    std::vector<std::int32_t> want = x;
    reference::allreduce(comm, want, ReduceOp::kSum);
    PendingCollective pending = iallreduce(comm, std::span<std::int32_t>(x), ReduceOp::kSum);
    pending.wait();
    check.same(want, x, 0, "int32 against the reference");
  });
}

TEST(NonblockingTest, ManyInFlightCompletedInAnyOrderAndRanksMayDisagreeOnTheOrder) {
  sweep::on_every_world(
      [](Comm& comm) {
        const int p = comm.size(), r = comm.rank();
        std::vector<std::vector<double>> buckets;
        for (int k = 0; k < 4; ++k) buckets.emplace_back(1000 + 37 * k, r + 1.0 + k);
        std::vector<PendingCollective> inflight;
        for (auto& b : buckets) inflight.push_back(iallreduce(comm, std::span<double>(b), ReduceOp::kSum));
        // Even ranks complete 2, 0, 3, 1; odd ranks 1, 3, 0, 2. Waiting for
        // one advances all, so neither order blocks the other.
        const std::vector<int> order = r % 2 == 0 ? std::vector<int>{2, 0, 3, 1} : std::vector<int>{1, 3, 0, 2};
        for (const int k : order) inflight[static_cast<std::size_t>(k)].wait();
        for (int k = 0; k < 4; ++k) {
          const double sum = p * (p + 1) / 2.0 + static_cast<double>(p) * k;
          EXPECT_EQ(buckets[static_cast<std::size_t>(k)],
                    std::vector<double>(1000 + 37 * static_cast<std::size_t>(k), sum))
              << "rank " << r << ", bucket " << k;
        }
      },
      {1, 2, 3, 4, 5});
}

TEST(NonblockingTest, TestPollsToCompletionBetweenOtherWork) {
  sweep::on_every_world(
      [](Comm& comm) {
        std::vector<float> g(1 << 16, 1.0f);
        PendingCollective pending = iallreduce(comm, std::span<float>(g), ReduceOp::kSum);
        volatile double work = 0;  // the "backward" of the next layer, between polls
        while (!pending.test())
          for (int i = 0; i < 1000; ++i) work = work + i * 1e-9;
        EXPECT_TRUE(pending.done());
        EXPECT_TRUE(pending.test());
        EXPECT_EQ(g, std::vector<float>(1 << 16, static_cast<float>(comm.size())));
      },
      {1, 2, 3, 4});
}

TEST(NonblockingTest, ReduceScatterAndAllgatherMatchTheBlockingRing) {
  sweep::on_every_world([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    for (const std::int64_t n : sweep::counts_for(p, false)) {
      std::vector<double> data = sweep::make_input<double>(r, n, ReduceOp::kSum);
      std::vector<double> blocking_data = data;
      const std::int64_t mine = Chunks(n, p).size(r);
      std::vector<double> out(static_cast<std::size_t>(mine)), want(static_cast<std::size_t>(mine));
      reduce_scatter(comm, std::span<double>(blocking_data), std::span<double>(want), ReduceOp::kAvg);
      PendingCollective rs = ireduce_scatter(comm, std::span<double>(data), std::span<double>(out), ReduceOp::kAvg);
      const std::vector<std::int64_t> in(static_cast<std::size_t>(n), 10 * r + 1);
      std::vector<std::int64_t> all(static_cast<std::size_t>(n * p)), want_all(all.size());
      allgather(comm, std::span<const std::int64_t>(in), std::span<std::int64_t>(want_all));
      PendingCollective ag = iallgather(comm, std::span<const std::int64_t>(in), std::span<std::int64_t>(all));
      ag.wait();
      rs.wait();
      const std::string what = "p " + std::to_string(p) + ", n " + std::to_string(n);
      check.same(want, out, 0, "ireduce_scatter " + what);
      check.same(want_all, all, 0, "iallgather " + what);
    }
  });
}

// Rank `rank`'s values for its chunk of Chunks(n, p) (`salt` tells two vectors
// apart); with `all`, every rank's values in its chunk, else -1 outside ours.
std::vector<std::int64_t> chunk_values(int rank, std::int64_t n, int p, int salt, bool all) {
  const Chunks chunks(n, p);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n), -1);
  for (int q = 0; q < p; ++q)
    if (all || q == rank)
      for (std::int64_t i = chunks.offset(q); i < chunks.offset(q) + chunks.size(q); ++i)
        v[static_cast<std::size_t>(i)] = 1000 * salt + 100 * q + i;
  return v;
}

// Chapter 04's prefetch: uneven chunks (p need not divide n) gathered in
// place, two in flight at once, polled, then completed in reverse order.
TEST(NonblockingTest, AllgatherInPlaceGathersUnevenChunksWithOthersInFlight) {
  sweep::on_every_world([](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    for (const std::int64_t n : sweep::counts_for(p, false)) {
      std::vector<std::int64_t> a = chunk_values(r, n, p, 1, false);
      std::vector<std::int64_t> b = chunk_values(r, n + 3, p, 2, false);
      PendingCollective first = iallgather_in_place(comm, std::span<std::int64_t>(a));
      PendingCollective second = iallgather_in_place(comm, std::span<std::int64_t>(b));
      (void)first.test();  // a poll advances both; neither needs it to finish
      second.wait();
      first.wait();
      const std::string what = "iallgather_in_place, p " + std::to_string(p) + ", n ";
      check.same(chunk_values(r, n, p, 1, true), a, 0, what + std::to_string(n));
      check.same(chunk_values(r, n + 3, p, 2, true), b, 0, what + std::to_string(n + 3));
    }
  });
}

TEST(NonblockingTest, UserMessagesInFlightNeverCrossAnAllreduce) {
  sweep::on_every_world(
      [](Comm& comm) {
        const int r = comm.rank(), p = comm.size();
        const int right = (r + 1) % p, left = (r + p - 1) % p;
        // The user's own message on tag 0 -- the tag the first collective takes.
        const std::vector<std::int64_t> mine{100 + r};
        std::vector<std::int64_t> theirs(1), data(64, r);
        Request s = comm.isend(mine, right, 0);
        PendingCollective pending = iallreduce(comm, std::span<std::int64_t>(data), ReduceOp::kSum);
        pending.wait();
        comm.recv(theirs, left, 0);
        comm.wait(s);
        EXPECT_EQ(theirs[0], 100 + left);
        EXPECT_EQ(data, std::vector<std::int64_t>(64, p * (p - 1) / 2));
      },
      {1, 2, 3, 4});
}

TEST(NonblockingTest, BadInputIsInvalidArgumentNamingTheRank) {
  sweep::on_every_world(
      [](Comm& comm) {
        std::vector<float> data(10);
        try {
          (void)iallreduce(comm, std::span<float>(data), ReduceOp::kSum, AllreduceAlgo::kRabenseifner);
          ADD_FAILURE() << "a non-ring iallreduce started";
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(comm.rank()) +
                                          ": iallreduce with algorithm 'rabenseifner': only the "
                                          "ring has a non-blocking form"));
        }
        std::vector<float> out(99);
        EXPECT_THROW((void)ireduce_scatter(comm, std::span<float>(data), std::span<float>(out), ReduceOp::kSum),
                     InvalidArgument);
        EXPECT_THROW((void)iallgather(comm, std::span<const float>(data), std::span<float>(out)),
                     InvalidArgument);
        EXPECT_THROW((void)iallgather_in_place(comm, std::span<float>(data),
                                               AllgatherAlgo::kRecursiveDoubling),
                     InvalidArgument);
        PendingCollective empty;
        EXPECT_TRUE(empty.done());
        EXPECT_TRUE(empty.test());
        empty.wait();
      },
      {1, 3});
}

// A ReduceOp cast from an out-of-range integer is refused when the collective
// starts, naming the call, like the blocking forms: not later inside the
// ring's reduction (under another name), and not never on one rank, where the
// ring reduces nothing.
TEST(NonblockingTest, AnOutOfRangeReduceOpIsRefusedOnEntry) {
  sweep::on_every_world(
      [](Comm& comm) {
        const auto op = static_cast<ReduceOp>(7);
        const std::string rank = "rank " + std::to_string(comm.rank()) + ": ";
        std::vector<float> data(6, 1.0f);
        try {
          PendingCollective started = iallreduce(comm, std::span<float>(data), op);
          started.wait();
          ADD_FAILURE() << "iallreduce with ReduceOp 7 was accepted";
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), HasSubstr(rank + "iallreduce: unknown ReduceOp 7"));
        }
        std::vector<float> out(static_cast<std::size_t>(Chunks(6, comm.size()).size(comm.rank())));
        try {
          PendingCollective started =
              ireduce_scatter(comm, std::span<float>(data), std::span<float>(out), op);
          started.wait();
          ADD_FAILURE() << "ireduce_scatter with ReduceOp 7 was accepted";
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), HasSubstr(rank + "ireduce_scatter: unknown ReduceOp 7"));
        }
      },
      {1, 3});
}

TEST(NonblockingTest, DroppedPendingCollectiveIsReportedLikeADroppedRequest) {
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    std::vector<double> data(1 << 18, 1.0);
    PendingCollective pending = iallreduce(comm, std::span<double>(data), ReduceOp::kSum);
    // Returns without waiting: the collective's requests are abandoned.
  });
  ASSERT_FALSE(report.errors.empty());
  bool named = false;
  for (const RankError& e : report.errors)
    named = named || e.message.find("requests never waited for") != std::string::npos;
  EXPECT_TRUE(named) << report.errors[0].message;
}

// A rank that polls test() on a collective its peer never joins makes calls
// but no progress: at the launch timeout it fails with TimeoutError naming
// what it polls for, as a rank blocked in wait() would (the MPI twin of this
// rule is mpi.watchdog_poll_collective).
TEST(NonblockingTest, PollingACollectiveAPeerNeverJoinsEndsInTimeout) {
  LaunchOptions options;
  options.timeout = std::chrono::seconds(1);
  const Report report = launch_collecting(2, options, [](Comm& comm) {
    std::vector<float> data(16, 1.0f);
    iallreduce(comm, std::span<float>(data), ReduceOp::kSum).wait();  // together once
    if (comm.rank() == 1) return;  // never joins the second
    PendingCollective sum = iallreduce(comm, std::span<float>(data), ReduceOp::kSum);
    while (!sum.test()) {
    }
  });
  ASSERT_EQ(report.errors.size(), 1u);
  const RankError& e = report.errors[0];
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.kind, "TimeoutError");
  EXPECT_THAT(e.message, HasSubstr("polled with test longer than the launch timeout"));
  EXPECT_THAT(e.message, HasSubstr("rank   0  running, polling with test for "));
  EXPECT_THAT(e.message, HasSubstr("to rank 1, collective operation 1, 32 B (8 float32)"));
}

}  // namespace
}  // namespace dtw::ch01
