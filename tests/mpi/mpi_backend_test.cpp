// Tests of what only the mpi backend does: the launch's own rules, tags and
// internal traffic kept apart, errors crossing processes, the reference
// collectives over MPI's, and split over MPI communicators.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/dtw.h"
#include "dtw/mpi.h"
#include "dtw_test.h"

namespace dtw {
namespace {

LaunchOptions mpi_options() {
  LaunchOptions o;
  o.backend = "mpi";
  o.timeout = std::chrono::seconds(20);
  return o;
}

TEST(MpiBackendTest, WorldZeroTakesTheJobSize) {
  const Report r = launch(0, mpi_options(), [](Comm& c) {
    EXPECT_EQ(c.size(), mpi::world_size());
    EXPECT_STREQ(c.backend(), "mpi");
  });
  EXPECT_EQ(r.world_size, mpi::world_size());
  EXPECT_EQ(r.backend, "mpi");
}

TEST(MpiBackendTest, WorldLargerThanTheJobIsAnError) {
  EXPECT_THROW(launch(mpi::world_size() + 1, mpi_options(), [](Comm&) {}), InvalidArgument);
}

TEST(MpiBackendTest, EveryProcessGetsTheWholeTrafficMatrix) {
  const int p = mpi::world_size();
  const Report r = launch(p, mpi_options(), [](Comm& c) {
    std::vector<float> out(100 + c.rank()), in(200);
    const int right = (c.rank() + 1) % c.size(), left = (c.rank() - 1 + c.size()) % c.size();
    c.sendrecv(out, right, in, left, 5);
  });
  for (int src = 0; src < p; ++src) {
    if (p == 1) break;
    EXPECT_EQ(r.traffic.bytes(src, (src + 1) % p), 4 * (100 + src)) << "row " << src;
    EXPECT_EQ(r.traffic.messages(src, (src + 1) % p), 1) << "row " << src;
  }
}

TEST(MpiBackendTest, LargerMessageThanBufferNamesRankAndSize) {
  if (mpi::world_size() < 2) GTEST_SKIP() << "needs 2 processes";
  try {
    launch(2, mpi_options(), [](Comm& c) {
      std::vector<int32_t> big(10), small(4);
      if (c.rank() == 0) c.send(big, 1, 3);
      if (c.rank() == 1) c.recv(small, 0, 3);
    });
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4 elements"), std::string::npos) << e.what();
  }
}

TEST(MpiBackendTest, AFailingRankAbortsThePeersWaitingForIt) {
  if (mpi::world_size() < 2) GTEST_SKIP() << "needs 2 processes";
  const Report r = launch_collecting(2, mpi_options(), [](Comm& c) {
    std::vector<float> x(8);
    if (c.rank() == 1) DTW_CHECK_ARG(false, "rank 1 gives up");
    c.recv(x, 1, 0);  // would wait forever without the abort notice
  });
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].kind, "AbortedError");
  EXPECT_EQ(r.errors[1].kind, "InvalidArgument");
  EXPECT_THROW(launch(2, mpi_options(), [](Comm& c) {
                 if (c.rank() == 1) DTW_CHECK_ARG(false, "rank 1 gives up");
                 c.barrier();
               }),
               InvalidArgument);
}

// A process that runs out of memory reports OutOfMemory naming the job, as
// a rank thread does, not an uncaught std::exception. The rank throws it
// itself: no test allocates for real.
TEST(MpiBackendTest, ARanksBadAllocIsOutOfMemoryNamingTheJob) {
  if (mpi::world_size() < 2) GTEST_SKIP() << "needs 2 processes";
  const Report r = launch_collecting(2, mpi_options(), [](Comm& c) {
    if (c.rank() == 1) throw std::bad_alloc();
    c.barrier();
  });
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].kind, "AbortedError");
  EXPECT_EQ(r.errors[1].kind, "OutOfMemory");
  EXPECT_EQ(r.errors[1].rank, 1);
  EXPECT_NE(r.errors[1].message.find("out of memory (std::bad_alloc) in a process of an mpi job "
                                     "of 2 ranks"),
            std::string::npos)
      << r.errors[1].message;
}

// A watchdog setting that is not a number of seconds (it fell back to the
// launch's timeout silently) is refused by every process before any rank runs,
// naming the variable and the value. Each process sets and restores its own.
TEST(MpiBackendTest, ABadWatchdogSettingIsRefusedNamingIt) {
  for (const char* value : {"abc", "-3", "0", "5s", ""}) {
    ::setenv("DTW_MPI_WATCHDOG_SECONDS", value, 1);
    bool ran = false;
    try {
      launch(0, mpi_options(), [&](Comm&) { ran = true; });
      ADD_FAILURE() << "DTW_MPI_WATCHDOG_SECONDS='" << value << "' was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("DTW_MPI_WATCHDOG_SECONDS='" + std::string(value) +
                                           "' is not a number of seconds"),
                std::string::npos)
          << e.what();
    }
    ::unsetenv("DTW_MPI_WATCHDOG_SECONDS");
    EXPECT_FALSE(ran) << value;
  }
  ::setenv("DTW_MPI_WATCHDOG_SECONDS", "2.5", 1);
  EXPECT_NO_THROW(launch(0, mpi_options(), [](Comm&) {}));
  ::unsetenv("DTW_MPI_WATCHDOG_SECONDS");
}

TEST(MpiBackendTest, DroppedPendingRequestIsReported) {
  EXPECT_THROW(launch(1, mpi_options(), [](Comm& c) {
                 std::vector<float> x(4);
                 Request r = c.irecv(x, 0, 9);
               }),
               InvalidArgument);
}

TEST(MpiBackendTest, ReferenceCollectivesMatchTheDefinition) {
  for (int p = 1; p <= mpi::world_size(); ++p) {
    launch(p, mpi_options(), [](Comm& c) {
      const int n = 7, r = c.rank(), s = c.size();
      std::vector<double> x(n);
      for (int i = 0; i < n; ++i) x[i] = r * 10 + i;
      std::vector<double> sum(n);
      for (int i = 0; i < n; ++i) sum[i] = 10.0 * s * (s - 1) / 2 + i * s;
      auto a = x;
      c.reference_allreduce(as_buffer(std::span(a)), ReduceOp::kSum);
      DTW_EXPECT_SAME(r, sum, a);
      a = x;
      c.reference_allreduce(as_buffer(std::span(a)), ReduceOp::kAvg);
      std::vector<double> avg(n);
      for (int i = 0; i < n; ++i) avg[i] = sum[i] / s;
      DTW_EXPECT_SAME(r, avg, a, 1e-12);
      std::vector<double> all(static_cast<std::size_t>(n * s));
      c.reference_allgather(as_buffer(std::span<const double>(x)), as_buffer(std::span(all)));
      for (int q = 0; q < s; ++q) EXPECT_EQ(all[static_cast<std::size_t>(q * n)], q * 10.0);
      const Chunks chunks(n, s);
      std::vector<double> mine(static_cast<std::size_t>(chunks.size(r)));
      c.reference_reduce_scatter(as_buffer(std::span<const double>(x)), as_buffer(std::span(mine)),
                                 ReduceOp::kSum);
      for (std::size_t i = 0; i < mine.size(); ++i)
        EXPECT_EQ(mine[i], sum[static_cast<std::size_t>(chunks.offset(r)) + i]);
      std::vector<int64_t> b(3, r == s - 1 ? 42 : 0);
      c.reference_broadcast(as_buffer(std::span(b)), s - 1);
      EXPECT_EQ(b[2], 42);
    });
  }
}

TEST(MpiBackendTest, ReferenceCountMismatchIsAnErrorNotAHang) {
  if (mpi::world_size() < 2) GTEST_SKIP() << "needs 2 processes";
  EXPECT_THROW(launch(2, mpi_options(),
                      [](Comm& c) {
                        std::vector<float> x(4 + c.rank());
                        c.reference_allreduce(as_buffer(std::span(x)), ReduceOp::kSum);
                      }),
               InvalidArgument);
}

TEST(MpiBackendTest, SplitBuildsMpiSubgroups) {
  const int p = mpi::world_size();
  launch(p, mpi_options(), [](Comm& c) {
    const int color = c.rank() % 2 == 0 ? 0 : kNoColor;
    auto sub = c.split(color, -c.rank());
    if (color == kNoColor) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    std::vector<int32_t> v{c.rank()};
    sub->reference_allreduce(as_buffer(std::span(v)), ReduceOp::kMax);
    int expect = 0;
    for (int q = 0; q < c.size(); q += 2) expect = q;
    EXPECT_EQ(v[0], expect);
    EXPECT_EQ(sub->world_rank_of(0), expect);  // keys are -rank: reversed order
    sub->barrier();
  });
}

}  // namespace
}  // namespace dtw
