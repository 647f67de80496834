// The threads backend with device buffers (LaunchOptions::device "cuda"), p
// ranks sharing the machine's GPU(s): chapter 00's solutions on host and
// device buffers, where the ranks ran and on which streams, the ordering of
// messages against kernels queued on the ranks' streams, bad input, and the
// deadlock detector, tracing and splits with device buffers. Needs one GPU.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "dtw/kernels/cuda_fill.h"
#include "dtw/kernels/cuda_reduce.h"
#include "dtw_expect_error.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "ranks_and_messages.h"
#include "threads_device.h"

namespace dtw {
namespace {

using testing::device_threads;
using testing::host_input;

TEST(ThreadsDeviceTest, EveryRankRunsOnAGpuWithAStreamOfItsOwn) {
  DTW_REQUIRE_GPUS(1);
  const int devices = testing::cuda_devices(nullptr);
  for (int p = 1; p <= 4; ++p) {
    std::vector<void*> streams(static_cast<std::size_t>(p));
    const Report report = launch(p, device_threads(), [&](Comm& comm) {
      EXPECT_FALSE(comm.exec().is_host()) << "rank " << comm.rank();
      EXPECT_EQ(comm.exec().device(), comm.rank() % devices);
      EXPECT_NE(comm.exec().stream(), nullptr) << "rank " << comm.rank() << ": the default stream";
      streams[static_cast<std::size_t>(comm.rank())] = comm.exec().stream();
      const Array<float> a(comm.exec(), 1000, MemoryCategory::kGradients);
      std::unique_ptr<Comm> sub = comm.split(comm.rank() % 2, 0);
      EXPECT_EQ(sub->exec().stream(), comm.exec().stream()) << "a split keeps the rank's stream";
    });
    ASSERT_EQ(report.places.size(), static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(report.places[r], "cuda:" + std::to_string(r % devices)) << "p " << p;
      EXPECT_EQ(report.memory[r].peak_of(MemoryCategory::kGradients), 4000)
          << "rank " << r << "'s ledger";
    }
    EXPECT_EQ(std::set<void*>(streams.begin(), streams.end()).size(), streams.size()) << "p " << p;
  }
}

TEST(ThreadsDeviceTest, Chapter00RunsOnHostAndDeviceBuffers) {
  DTW_REQUIRE_GPUS(1);
  for (int p = 1; p <= 4; ++p) {
    const Report report = launch(p, device_threads(), [&](Comm& comm) {
      const int r = comm.rank(), left = (r + p - 1) % p, right = (r + 1) % p;
      if (p >= 2) {
        const std::vector<std::int64_t> sizes{0, 1, 1000};
        const auto samples = ch00::ping_pong(comm, sizes, 2, p - 1, 0);
        EXPECT_EQ(samples.size(), r == p - 1 ? sizes.size() : 0u) << "rank " << r;
      }
      EXPECT_EQ(ch00::token_ring(comm, 5, 2), 5 + 2 * p * (p + 1) / 2) << "rank " << r;
      for (auto [n_left, n_right] : {std::pair<int, int>{0, 0}, {1, 1}, {3, 5}, {1000, 1000}}) {
        const std::vector<double> to_left = host_input<double>(2 * r, n_left),
                                  to_right = host_input<double>(2 * r + 1, n_right);
        const std::vector<double> want_left = host_input<double>(2 * left + 1, n_right),
                                  want_right = host_input<double>(2 * right, n_left);
        std::vector<double> from_left(n_right), from_right(n_left);
        ch00::exchange_with_neighbors<double>(comm, to_left, to_right, from_left, from_right);
        EXPECT_EQ(testing::compare(r, want_left, from_left), "") << "host, p " << p;
        EXPECT_EQ(testing::compare(r, want_right, from_right), "") << "host, p " << p;
        const Array<double> d_left(comm.exec(), to_left), d_right(comm.exec(), to_right);
        Array<double> d_from_left(comm.exec(), n_right), d_from_right(comm.exec(), n_left);
        ch00::exchange_with_neighbors<double>(comm, d_left.span(), d_right.span(),
                                              d_from_left.span(), d_from_right.span());
        EXPECT_EQ(testing::compare(r, want_left, d_from_left.to_vector()), "") << "device, p " << p;
        EXPECT_EQ(testing::compare(r, want_right, d_from_right.to_vector()), "")
            << "device, p " << p;
      }
    });
    EXPECT_TRUE(report.ok()) << "p " << p;
  }
}

// Queues `value` into every element of `a` on the rank's stream, not waited for.
void fill_async(Comm& comm, Array<float>& a, float value) {
  kernels::device_fill(a.data(), a.size(), &value, sizeof(float), comm.exec().stream());
}

// Rank 0 queues `passes` additions of 1 to a zeroed buffer on its stream and
// sends it at once: the receiver must see `passes`, not a value from before
// or between the kernels (the copy waits for the sender's event). Right after
// the send returns, rank 0 queues an overwrite: the data landed before. The
// receiver's own queued fill of its buffer runs before the copy (same
// stream). Large buffers, so a copy that raced the kernels would show it.
TEST(ThreadsDeviceTest, MessagesWaitForKernelsQueuedBeforeTheSend) {
  DTW_REQUIRE_GPUS(1);
  constexpr std::int64_t kN = 1 << 24;
  constexpr int kPasses = 8;
  const auto count_not = [](const std::vector<float>& v, float want) {
    return std::count_if(v.begin(), v.end(), [&](float x) { return x != want; });
  };
  launch(2, device_threads(), [&](Comm& comm) {
    Array<float> data(comm.exec(), kN), ones(comm.exec(), kN);
    data.fill(0.0f);
    ones.fill(1.0f);
    if (comm.rank() == 0) {
      for (int round = 0; round < 3; ++round) {
        data.fill(0.0f);
        for (int i = 0; i < kPasses; ++i)
          kernels::device_reduce_into(data.data(), ones.data(), kN, ReduceOp::kSum,
                                      comm.exec().stream());
        if (round == 0) comm.send(data, 1);
        if (round == 1) comm.sendrecv(data, 1, ones, 1);  // ones comes back as ones
        if (round == 2) {
          Request s = comm.isend(data, 1);
          comm.wait(s);
        }
        fill_async(comm, data, -1.0f);  // after the send: must never reach rank 1
      }
    } else {
      Array<float> got(comm.exec(), kN);
      fill_async(comm, got, -2.0f);
      comm.recv(got, 0);
      EXPECT_EQ(count_not(got.to_vector(), kPasses), 0) << "recv";
      fill_async(comm, got, 1.0f);  // queued before the receive: the copy lands after it
      comm.sendrecv(ones, 0, got, 0);
      EXPECT_EQ(count_not(got.to_vector(), kPasses), 0) << "sendrecv";
      fill_async(comm, got, 1.0f);
      Request q = comm.irecv_reduce(got, 0, ReduceOp::kSum);
      while (!comm.test(q)) {
      }
      EXPECT_EQ(count_not(got.to_vector(), kPasses + 1), 0) << "irecv_reduce after a queued fill";
    }
  });
}

TEST(ThreadsDeviceTest, RecvReduceAndLocalStepsRunOnTheDevice) {
  DTW_REQUIRE_GPUS(1);
  for (int p = 2; p <= 4; ++p) {
    launch(p, device_threads(), [&](Comm& comm) {
      const int r = comm.rank(), n = 3 * p + 1;
      Array<float> mine(comm.exec(), host_input<float>(r, n)), acc(comm.exec(), n),
          copy(comm.exec(), n);
      comm.copy_local(acc.span(), std::span<const float>(mine.span()));
      // Everyone's input reduced in a ring order into rank 0's acc, then averaged.
      if (r == 0) {
        for (int src = 1; src < p; ++src) comm.recv_reduce(acc, src, ReduceOp::kSum);
        comm.divide_local(acc.span(), p);
        std::vector<float> want(static_cast<std::size_t>(n), 0.0f);
        for (int s = 0; s < p; ++s) {
          const auto in = host_input<float>(s, n);
          for (int i = 0; i < n; ++i) want[i] += in[i];
        }
        for (float& x : want) x /= static_cast<float>(p);
        EXPECT_EQ(testing::compare(0, want, acc.to_vector(), 1e-6), "") << "p " << p;
        comm.reduce_local(copy.span(), std::span<const float>(mine.span()), ReduceOp::kMax);
      } else {
        comm.send(mine, 0);
      }
    });
  }
}

TEST(ThreadsDeviceTest, BadInputNamesTheRankAndTheValues) {
  DTW_REQUIRE_GPUS(1);
  testing::expect_error(
      [] {
        launch(2, device_threads(), [](Comm& comm) {
          const Array<float> src(comm.exec(), 10);
          std::vector<float> host(10);
          if (comm.rank() == 1)
            comm.copy_local(std::span<float>(host), std::span<const float>(src.span()));
        });
      },
      {"rank 1", "copy_local: dst (", "10 float32) is host memory", "device buffers"});
  testing::expect_error(
      [] {
        launch(1, device_threads(), [](Comm& comm) {
          std::vector<double> host(3, 1.0);
          comm.divide_local(std::span<double>(host), 2);
        });
      },
      {"rank 0", "divide_local: data (", "3 float64) is host memory"});
  testing::expect_error(
      [] {
        launch(2, device_threads(), [](Comm& comm) {
          Array<float> a(comm.exec(), comm.rank() == 0 ? 5 : 4);
          a.fill(1.0f);
          if (comm.rank() == 0) comm.send(a, 1, 3);
          else comm.recv_reduce(a, 0, ReduceOp::kSum, 3);
        });
      },
      // A larger message is refused by the check every receive makes, before
      // recv_reduce's own (exactly its size): the words differ, the values not.
      {"rank 1: message larger than the receive buffer", "rank 0 sends 5 float32",
       "rank 1 receives into 4 float32"});
  testing::expect_error(
      [] {
        launch(2, device_threads(), [](Comm& comm) {
          Array<std::int64_t> a(comm.exec(), comm.rank() == 0 ? 7 : 6);
          a.fill(1);
          if (comm.rank() == 0) comm.send(a, 1);
          else comm.recv(a, 0);
        });
      },
      {"message larger than the receive buffer", "rank 0 sends 7 int64",
       "rank 1 receives into 6 int64"});
}

TEST(ThreadsDeviceTest, DeadlockDetectorAndTraceWorkWithDeviceBuffers) {
  DTW_REQUIRE_GPUS(1);
  testing::expect_error(
      [] {
        launch(2, device_threads(), [](Comm& comm) {
          const Array<float> out(comm.exec(), 1000);
          Array<float> in(comm.exec(), 1000);
          comm.send(out, 1 - comm.rank(), 4);  // both send first: synchronous sends deadlock
          comm.recv(in, 1 - comm.rank(), 4);
        });
      },
      {"deadlock", "rank 0", "rank 1", "tag 4"});
  LaunchOptions traced = device_threads();
  traced.trace = true;
  const Report report = launch(2, traced, [](Comm& comm) {
    const Array<float> out(comm.exec(), host_input<float>(comm.rank(), 100));
    Array<float> in(comm.exec(), 100);
    comm.sendrecv(out, 1 - comm.rank(), in, 1 - comm.rank());
    EXPECT_EQ(
        testing::compare(comm.rank(), host_input<float>(1 - comm.rank(), 100), in.to_vector()), "");
  });
  EXPECT_FALSE(report.trace.empty());
  EXPECT_EQ(report.traffic.bytes(0, 1), 400);
  EXPECT_EQ(report.traffic.messages(1, 0), 1);
}

}  // namespace
}  // namespace dtw
