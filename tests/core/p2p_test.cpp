// Point-to-point semantics of the threads backend: matching on (source, tag),
// ordering, sizes from zero bytes to 256 MiB, self-sends, many outstanding requests.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string_view>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

std::vector<float> iota_floats(std::size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(P2pTest, SendRecvDeliversData) {
  for (int world : {2, 3, 5}) {
    launch_bounded(world, [](Comm& comm) {
      const int right = (comm.rank() + 1) % comm.size();
      const int left = (comm.rank() + comm.size() - 1) % comm.size();
      const auto out = iota_floats(17, static_cast<float>(100 * comm.rank()));
      std::vector<float> in(17, -1.0f);
      EXPECT_EQ(comm.sendrecv(out, right, in, left, 3), 17);
      DTW_EXPECT_SAME(comm.rank(), iota_floats(17, static_cast<float>(100 * left)), in);
    });
  }
}

TEST(P2pTest, SameSourceAndTagNeverOvertake) {
  constexpr int kMessages = 200;
  launch_bounded(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      std::vector<Request> reqs;
      std::vector<std::vector<std::int32_t>> bufs(kMessages);
      for (int i = 0; i < kMessages; ++i) {
        // Sizes alternate across the eager limit, so small and large copies mix.
        bufs[i].assign(i % 2 ? 5 : 40'000, i);
        reqs.push_back(comm.isend(bufs[i], 1, 7));
      }
      comm.wait_all(reqs);
    } else {
      std::vector<std::int32_t> in(40'000);
      for (int i = 0; i < kMessages; ++i) {
        const std::int64_t n = comm.recv(in, 0, 7);
        ASSERT_EQ(n, i % 2 ? 5 : 40'000) << "message " << i;
        ASSERT_EQ(in[0], i) << "message " << i << " overtaken";
        ASSERT_EQ(in[n - 1], i);
      }
    }
  });
}

TEST(P2pTest, DifferentTagsMatchIndependently) {
  launch_bounded(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      const std::vector<std::int64_t> a{1, 1}, b{2, 2, 2};
      // Blocking sends are synchronous: tag 1 must be received first, although
      // tag 2 was sent first -- so the sends must be non-blocking.
      Request r2 = comm.isend(b, 1, 2);
      Request r1 = comm.isend(a, 1, 1);
      comm.wait(r1);
      comm.wait(r2);
    } else {
      std::vector<std::int64_t> a(2), b(3);
      EXPECT_EQ(comm.recv(a, 0, 1), 2);
      EXPECT_EQ(comm.recv(b, 0, 2), 3);
      EXPECT_EQ(a, (std::vector<std::int64_t>{1, 1}));
      EXPECT_EQ(b, (std::vector<std::int64_t>{2, 2, 2}));
    }
  });
}

TEST(P2pTest, DifferentSourcesMatchIndependently) {
  launch_bounded(3, [](Comm& comm) {
    if (comm.rank() == 0) {
      std::vector<double> from1(1), from2(1);
      // Receive from rank 2 first although rank 1 may have sent earlier.
      comm.recv(from2, 2, 0);
      comm.recv(from1, 1, 0);
      EXPECT_EQ(from1[0], 1.0);
      EXPECT_EQ(from2[0], 2.0);
    } else {
      comm.send(std::vector<double>{static_cast<double>(comm.rank())}, 0, 0);
    }
  });
}

TEST(P2pTest, ZeroByteMessagesMatch) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<float> empty;
    if (comm.rank() == 0) {
      comm.send(empty, 1, 4);
    } else {
      std::vector<float> in(3, 9.0f);
      EXPECT_EQ(comm.recv(in, 0, 4), 0);
      EXPECT_EQ(in, std::vector<float>(3, 9.0f));  // untouched
    }
  });
}

TEST(P2pTest, ShorterMessageReportsItsCount) {
  launch_bounded(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      comm.send(std::vector<std::int32_t>{4, 5, 6}, 1);
    } else {
      std::vector<std::int32_t> in(10, 0);
      EXPECT_EQ(comm.recv(in, 0), 3);
      EXPECT_EQ(in[2], 6);
      EXPECT_EQ(in[3], 0);
    }
  });
}

TEST(P2pTest, HugeMessageArrivesIntact) {
#ifdef DTW_TSAN
  constexpr std::size_t kBytes = std::size_t{16} << 20;  // TSan: 16 MiB keeps it quick
#else
  constexpr std::size_t kBytes = std::size_t{256} << 20;
#endif
  launch_bounded(2, [&](Comm& comm) {
    const std::size_t n = kBytes / sizeof(std::int64_t);
    if (comm.rank() == 0) {
      std::vector<std::int64_t> out(n);
      std::iota(out.begin(), out.end(), std::int64_t{0});
      comm.send(out, 1, 0);
    } else {
      std::vector<std::int64_t> in(n, -1);
      EXPECT_EQ(comm.recv(in, 0, 0), static_cast<std::int64_t>(n));
      for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(in[i], static_cast<std::int64_t>(i));
      EXPECT_EQ(in.back(), static_cast<std::int64_t>(n - 1));
    }
  });
}

// A receive that matches a large message already sent does not copy it while
// it is posted: the receiver copies in its wait. Otherwise, in an exchange
// (sendrecv posts its receive first), the rank that arrives second would copy
// its whole message before posting its send, and its peer, waiting for that
// send, would copy only afterwards: the two copies one after the other
// (docs/results/ring_profile.md). A rule of the threads backend: MPI may
// complete a receive whenever it likes, so the MPI twin checks only the data.
TEST(P2pTest, LargeReceiveMatchedWhilePostingIsCopiedInTheWait) {
  launch_bounded(2, [](Comm& comm) {
    const bool threads = std::string_view(comm.backend()) == "threads";
    const std::size_t n = std::size_t{1} << 18;  // 1 MiB: above the eager limit
    if (comm.rank() == 1) {
      const auto out = iota_floats(n, 1.0f);
      Request r = comm.isend(out, 0, 0);
      comm.barrier();  // the send is queued before rank 0 posts its receive
      comm.wait(r);
    } else {
      std::vector<float> in(n, -1.0f);
      comm.barrier();
      Request r = comm.irecv(in, 1, 0);
      // Matched, not copied: only this rank copies into its buffer, in its wait.
      if (threads) {
        EXPECT_EQ(in.front(), -1.0f);
        EXPECT_EQ(in.back(), -1.0f);
      }
      comm.wait(r);
      EXPECT_EQ(in.front(), 1.0f);
      EXPECT_EQ(in.back(), static_cast<float>(n));
    }
  });
}

TEST(P2pTest, SelfSendThroughIsendIrecv) {
  for (int world : {1, 3}) {
    launch_bounded(world, [](Comm& comm) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{100'000}}) {
        const auto out = iota_floats(n, 1.0f);
        std::vector<float> in(n, 0.0f);
        Request s = comm.isend(out, comm.rank(), 9);
        Request r = comm.irecv(in, comm.rank(), 9);
        comm.wait(s);
        comm.wait(r);
        EXPECT_EQ(r.received_count(), static_cast<std::int64_t>(n));
        DTW_EXPECT_SAME(comm.rank(), out, in);
      }
    });
  }
}

TEST(P2pTest, SelfSendrecvWorks) {
  launch_bounded(1, [](Comm& comm) {
    const std::vector<std::int32_t> out{1, 2, 3};
    std::vector<std::int32_t> in(3);
    EXPECT_EQ(comm.sendrecv(out, 0, in, 0, 0), 3);
    EXPECT_EQ(in, out);
  });
}

TEST(P2pTest, ThousandOutstandingRequests) {
  constexpr int kCount = 1000;
  launch_bounded(2, [](Comm& comm) {
    const int peer = 1 - comm.rank();
    std::vector<std::vector<std::int32_t>> out(kCount), in(kCount);
    std::vector<Request> reqs;
    reqs.reserve(2 * kCount);
    // Receives posted in reverse tag order, sends in forward order: every
    // match has to be found by tag, not by position.
    for (int i = kCount - 1; i >= 0; --i) {
      in[i].assign(3, -1);
      reqs.push_back(comm.irecv(in[i], peer, i));
    }
    for (int i = 0; i < kCount; ++i) {
      out[i] = {comm.rank(), i, 2 * i};
      reqs.push_back(comm.isend(out[i], peer, i));
    }
    comm.wait_all(reqs);
    for (const Request& r : reqs) EXPECT_FALSE(r.pending());
    for (int i = 0; i < kCount; ++i)
      ASSERT_EQ(in[i], (std::vector<std::int32_t>{peer, i, 2 * i})) << "tag " << i;
  });
}

TEST(P2pTest, RecvReduceCombinesIntoBuffer) {
  launch_bounded(2, [](Comm& comm) {
    for (std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1} << 16}) {
      if (comm.rank() == 0) {
        comm.send(std::vector<double>(n, 2.5), 1, 1);
      } else {
        std::vector<double> acc(n, 1.0);
        comm.recv_reduce(acc, 0, ReduceOp::kSum, 1);
        EXPECT_EQ(acc.front(), 3.5);
        EXPECT_EQ(acc.back(), 3.5);
      }
    }
  });
}

TEST(P2pTest, BarrierSeparatesPhases) {
  for (int world : {1, 2, 5, 8}) {
    std::atomic<int> arrived{0};
    launch_bounded(world, [&](Comm& comm) {
      for (int round = 1; round <= 5; ++round) {
        arrived.fetch_add(1);
        comm.barrier();
        EXPECT_GE(arrived.load(), round * comm.size());
        comm.barrier();
      }
    });
  }
}

TEST(P2pTest, RequestsAreMovable) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<std::int32_t> buf(4, comm.rank());
    std::vector<std::int32_t> in(4, -1);
    Request r = comm.irecv(in, 1 - comm.rank(), 0);
    Request moved = std::move(r);
    EXPECT_FALSE(r.pending());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_TRUE(moved.pending());
    comm.send(buf, 1 - comm.rank(), 0);
    comm.wait(moved);
    EXPECT_EQ(in, std::vector<std::int32_t>(4, 1 - comm.rank()));
  });
}

}  // namespace
}  // namespace dtw
