// The fiber mode of the threads backend (RankMode::kFibers): the same results,
// traffic, and deadlock and timeout reports as one thread per rank, and the
// things only fibers can get wrong (a poller starving its peer on the same
// worker, exception state across a switch). Correctness only: the timings are
// in bench/threads_scale_bench.cpp and docs/results/threads_at_scale.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/dtw.h"
#include "dtw/reference.h"
#include "dtw/world_fit.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;

LaunchOptions in_mode(RankMode mode) {
  LaunchOptions options;
  options.rank_mode = mode;
  return options;
}

// Sets an environment variable for one scope, restoring what was there.
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

// Chapter 01's ring allreduce (sum), written against Comm: a reduce-scatter
// around the ring, then an allgather around it.
void ring_allreduce(Comm& comm, std::span<double> data) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const Chunks chunks(static_cast<std::int64_t>(data.size()), p);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  std::vector<double> incoming(static_cast<std::size_t>(chunks.size(0)));
  for (int s = 0; s < p - 1; ++s) {
    const std::span<double> mine = chunks.of(data, r - s - 1);
    const std::span<double> in(incoming.data(), mine.size());
    comm.sendrecv(chunks.of(data, r - s), right, in, left);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] += in[i];
  }
  for (int s = 0; s < p - 1; ++s)
    comm.sendrecv(chunks.of(data, r + 1 - s), right, chunks.of(data, r - s), left);
}

// Element i of rank r's input: integers, so every summation order is exact.
double input(int r, std::size_t i) {
  return static_cast<double>((r + 1) * 1000 + static_cast<int>(i % 97));
}

void expect_sums(Comm& comm, std::span<const double> got) {
  const int p = comm.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    double want = 0;
    for (int r = 0; r < p; ++r) want += input(r, i);
    DTW_CHECK_ARG(got[i] == want, "rank " << comm.rank() << ", index " << i << ": expected " << want
                                          << ", got " << got[i]);
  }
}

// Runs the ring allreduce and the reference collectives in `mode`.
Report collectives(int p, RankMode mode) {
  return launch(p, in_mode(mode), [](Comm& comm) {
    std::vector<double> data(203);  // not divisible by most world sizes
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = input(comm.rank(), i);
    std::vector<double> ref = data;
    ring_allreduce(comm, data);
    expect_sums(comm, data);
    reference::allreduce(comm, ref, ReduceOp::kSum);
    expect_sums(comm, ref);
    std::vector<int> all(static_cast<std::size_t>(comm.size()), -1);
    const int mine = comm.rank() * 3;
    reference::allgather(comm, std::span<const int>(&mine, 1), all);
    for (int r = 0; r < comm.size(); ++r)
      DTW_CHECK_ARG(all[static_cast<std::size_t>(r)] == r * 3,
                    "allgather: rank " << comm.rank() << ", index " << r << ": got "
                                       << all[static_cast<std::size_t>(r)]);
    comm.barrier();
  });
}

TEST(FibersTest, CollectivesGiveTheSameResultsAndTrafficAsThreads) {
#if DTW_TSAN
  const std::vector<int> sizes = {1, 2, 3, 5, 8};
#else
  const std::vector<int> sizes = {1, 2, 3, 5, 8, 13, 64, 100};
#endif
  for (int p : sizes) {
    SCOPED_TRACE("world of " + std::to_string(p));
    const Report threads = collectives(p, RankMode::kThreads);
    const Report fibers = collectives(p, RankMode::kFibers);
    ASSERT_TRUE(fibers.ok());
    EXPECT_EQ(fibers.total_bytes(), threads.total_bytes());
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst) {
        ASSERT_EQ(fibers.traffic.bytes(src, dst), threads.traffic.bytes(src, dst))
            << src << "->" << dst;
        ASSERT_EQ(fibers.traffic.messages(src, dst), threads.traffic.messages(src, dst));
      }
  }
}

TEST(FibersTest, OneWorkerRunsAWholeRing) {
  // Every fiber on one worker thread: each blocking exchange is a switch to
  // the next fiber of the same thread.
  const ScopedEnv one("DTW_FIBER_WORKERS", "1");
  const Report report = collectives(7, RankMode::kFibers);
  EXPECT_TRUE(report.ok());
}

TEST(FibersTest, ADeadlockIsReportedAsWithThreads) {
  const auto unsafe = [](Comm& comm) {
    // Every rank sends first (synchronous): a cycle through the whole world.
    std::vector<float> out(4, 1.0f), in(4);
    comm.send(out, (comm.rank() + 1) % comm.size(), 5);
    comm.recv(in, (comm.rank() + comm.size() - 1) % comm.size(), 5);
  };
  const Report threads = launch_collecting(6, in_mode(RankMode::kThreads), unsafe);
  const Report fibers = launch_collecting(6, in_mode(RankMode::kFibers), unsafe);
  ASSERT_EQ(fibers.errors.size(), 6u);
  ASSERT_EQ(threads.errors.size(), 6u);
  for (const RankError& e : fibers.errors) {
    EXPECT_EQ(e.kind, "DeadlockError") << e.message;
    EXPECT_THAT(e.message, HasSubstr("deadlock: every live rank is blocked"));
    EXPECT_THAT(e.message,
                HasSubstr("rank 0 -> rank 1 -> rank 2 -> rank 3 -> rank 4 -> rank 5 -> rank 0"));
  }
  EXPECT_THAT(threads.errors.front().message,
              HasSubstr("rank 0 -> rank 1 -> rank 2 -> rank 3 -> rank 4 -> rank 5 -> rank 0"));
  // launch (not collecting) throws the same type.
  EXPECT_THROW(launch(6, in_mode(RankMode::kFibers), unsafe), DeadlockError);
}

TEST(FibersTest, ATimeoutIsReportedAsWithThreads) {
  for (RankMode mode : {RankMode::kThreads, RankMode::kFibers}) {
    SCOPED_TRACE(mode == RankMode::kFibers ? "fibers" : "threads");
    LaunchOptions options = in_mode(mode);
    options.timeout = std::chrono::milliseconds(200);
    // Rank 0 polls for a message nobody sends: it is running, not blocked, so
    // this is no deadlock; every other rank waits for rank 0. The first to
    // run out of time fails the launch, the rest are cancelled.
    const auto stalled = [](Comm& comm) {
      std::int64_t x = 0;
      if (comm.rank() == 0) {
        Request never = comm.irecv(std::span<std::int64_t>(&x, 1), 3, 9);
        while (!comm.test(never)) {
        }
        return;
      }
      comm.recv(std::span<std::int64_t>(&x, 1), 0, 1);
    };
    const Report report = launch_collecting(4, options, stalled);
    ASSERT_EQ(report.errors.size(), 4u);
    int timeouts = 0;
    for (const RankError& e : report.errors) {
      if (e.kind == "TimeoutError") {
        ++timeouts;
        EXPECT_THAT(e.message, HasSubstr("timeout: a rank"));
      } else {
        EXPECT_EQ(e.kind, "AbortedError");
        EXPECT_THAT(e.message, HasSubstr("failed first (TimeoutError)"));
      }
    }
    EXPECT_EQ(timeouts, 1);
    EXPECT_THROW(launch(4, options, stalled), TimeoutError);
  }
}

TEST(FibersTest, APollerDoesNotStarveThePeerItPollsForOnItsWorker) {
  // One worker: rank 1 can only send once rank 0's test() lets it run. The
  // timeout only bounds a regression; it is never reached when this works.
  const ScopedEnv one("DTW_FIBER_WORKERS", "1");
  LaunchOptions options = in_mode(RankMode::kFibers);
  options.timeout = std::chrono::seconds(30);
  const Report report = launch(2, options, [](Comm& comm) {
    std::int64_t x = 0;
    if (comm.rank() == 0) {
      Request r = comm.irecv(std::span<std::int64_t>(&x, 1), 1, 2);
      while (!comm.test(r)) {
      }
      DTW_CHECK_ARG(x == 42, "rank 0 got " << x);
    } else {
      x = 42;
      comm.send(std::span<const std::int64_t>(&x, 1), 0, 2);
    }
  });
  EXPECT_TRUE(report.ok());
}

TEST(FibersTest, AFiberSwitchedOutInsideACatchBlockKeepsItsException) {
  // Several fibers of one worker each switch away (in barrier) while handling
  // their own exception; rethrowing afterwards must give back their own.
  const ScopedEnv one("DTW_FIBER_WORKERS", "1");
  launch(8, in_mode(RankMode::kFibers), [](Comm& comm) {
    const std::string mine = "rank " + std::to_string(comm.rank());
    try {
      throw std::runtime_error(mine);
    } catch (const std::runtime_error&) {
      DTW_CHECK_ARG(std::uncaught_exceptions() == 0, "uncaught count leaked in");
      comm.barrier();
      try {
        throw;
      } catch (const std::runtime_error& again) {
        DTW_CHECK_ARG(again.what() == mine, mine << " rethrew '" << again.what() << "'");
      }
    }
  });
}

TEST(FibersTest, TheModeIsChosenByTheRuleTheOptionOrTheEnvironment) {
  const ScopedEnv clear("DTW_RANK_MODE", nullptr);
  EXPECT_FALSE(ranks_run_as_fibers(4, RankMode::kAuto)) << "a small world stays threads";
  EXPECT_TRUE(ranks_run_as_fibers(1 << 20, RankMode::kAuto)) << "a huge world is fibers";
  EXPECT_TRUE(ranks_run_as_fibers(2, RankMode::kFibers));
  EXPECT_FALSE(ranks_run_as_fibers(1 << 20, RankMode::kThreads));
  {
    const ScopedEnv env("DTW_RANK_MODE", "fibers");
    EXPECT_TRUE(ranks_run_as_fibers(4, RankMode::kAuto));
    EXPECT_FALSE(ranks_run_as_fibers(4, RankMode::kThreads)) << "the option wins";
  }
  {
    const ScopedEnv env("DTW_RANK_MODE", "threads");
    EXPECT_FALSE(ranks_run_as_fibers(1 << 20, RankMode::kAuto));
  }
  {
    const ScopedEnv env("DTW_RANK_MODE", "fiber");
    try {
      ranks_run_as_fibers(4, RankMode::kAuto);
      ADD_FAILURE() << "DTW_RANK_MODE=fiber accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("DTW_RANK_MODE is 'fiber': it takes threads, fibers or auto"));
    }
  }
}

TEST(FibersTest, BadModeAndWorkerCountAreRefused) {
  try {
    launch(2, in_mode(static_cast<RankMode>(7)), [](Comm&) {});
    ADD_FAILURE() << "rank mode 7 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank mode 7 is not a RankMode"));
  }
  const ScopedEnv zero("DTW_FIBER_WORKERS", "0");
  try {
    launch(2, in_mode(RankMode::kFibers), [](Comm&) {});
    ADD_FAILURE() << "DTW_FIBER_WORKERS=0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("DTW_FIBER_WORKERS is '0'"));
  }
}

TEST(FibersTest, WorldFitCountsWorkerThreadsNotRankThreads) {
  const WorldNeeds threads = threads_world_needs(4096), fibers = threads_world_needs(4096, 2);
  EXPECT_EQ(threads.threads, 4096);
  EXPECT_EQ(fibers.threads, 2);
  EXPECT_EQ(fibers.memory_maps, 2 * 4096) << "a stack and its guard page per fiber";
  EXPECT_LT(fibers.bytes, threads.bytes) << "no kernel thread, no per-thread C library area";
  EXPECT_GE(fibers.bytes, 4096LL * (16 << 10));
  MachineRoom room;
  room.threads_left = 100;
  EXPECT_NO_THROW(check_threads_world_fits(4096, room, 2));
  room.bytes_available = 1 << 20;
  try {
    check_threads_world_fits(4096, room, 2);
    ADD_FAILURE() << "4096 fibers fit in 1 MiB";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.what(), HasSubstr("a world of 4096 rank fibers needs about"));
  }
}

}  // namespace
}  // namespace dtw
