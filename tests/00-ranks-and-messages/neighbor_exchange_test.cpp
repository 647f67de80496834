// Step 00.3: exchange_with_neighbors, checked element by element on every
// rank, for every element type, world size and halo width; and the tempting
// blocking shift, which the deadlock detector must catch.
#include <string>
#include <vector>

#include "dtw_test.h"
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using dtw::testing::launch_bounded;

DTW_TEST_STEPS(NeighborExchangeTest, "00.3");
// The deadlock the chapter is about, written in the test: no lab code.
DTW_TEST_STEPS(UnsafeExchangeTest);

// What rank r sends in direction dir (0 = left, 1 = right) at index i:
// unique per (rank, direction, index) and exact in every element type.
template <class T>
std::vector<T> halo(int r, int dir, std::size_t n) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(r * 4096 + dir * 2048 + static_cast<int>(i % 2048));
  return out;
}

// Every rank sends `n_left` elements left and `n_right` right; so it receives
// n_right from its left neighbour and n_left from its right one.
template <class T>
void check_exchange(int p, std::size_t n_left, std::size_t n_right) {
  launch_bounded(p, [&](Comm& comm) {
    const int r = comm.rank(), left = (r + p - 1) % p, right = (r + 1) % p;
    const std::vector<T> to_left = halo<T>(r, 0, n_left), to_right = halo<T>(r, 1, n_right);
    // Start from a value no neighbour sends, so a missed receive shows.
    std::vector<T> from_left(n_right, T(-1)), from_right(n_left, T(-1));
    exchange_with_neighbors<T>(comm, to_left, to_right, from_left, from_right);
    // The left neighbour sent its right halo to us, the right one its left halo.
    const std::string in_left = dtw::testing::compare(r, halo<T>(left, 1, n_right), from_left);
    EXPECT_TRUE(in_left.empty()) << in_left << " in from_left, which must hold what rank " << left
                                 << " (the left neighbour) sent right, tag kRightward";
    const std::string in_right = dtw::testing::compare(r, halo<T>(right, 0, n_left), from_right);
    EXPECT_TRUE(in_right.empty()) << in_right << " in from_right, which must hold what rank "
                                  << right << " (the right neighbour) sent left, tag kLeftward";
    // What we sent is untouched.
    DTW_EXPECT_SAME(r, halo<T>(r, 0, n_left), to_left);
  });
}

TEST(NeighborExchangeTest, ExchangesHalosOnEveryRank) {
  for (int p : {1, 2, 3, 7, 16})
    for (std::size_t n : {0u, 1u, 1000u}) {
      DTW_TRACE("neighbour exchange, p " << p << ", n " << n);
      check_exchange<double>(p, n, n);
    }
}

TEST(NeighborExchangeTest, EveryElementTypeWorks) {
  for (int p : {2, 3}) {
    DTW_TRACE("neighbour exchange, p " << p << ", n 17, each element type");
    check_exchange<float>(p, 17, 17);
    check_exchange<double>(p, 17, 17);
    check_exchange<std::int32_t>(p, 17, 17);
    check_exchange<std::int64_t>(p, 17, 17);
  }
}

TEST(NeighborExchangeTest, LeftAndRightHalosMayDifferInWidth) {
  // Widths 3 and 5 catch a swapped direction: the sizes would not line up.
  for (int p : {1, 2, 3, 7}) {
    DTW_TRACE("neighbour exchange, p " << p << ", halos 3 and 5, then 0 and 4");
    check_exchange<std::int32_t>(p, 3, 5);
    check_exchange<std::int32_t>(p, 0, 4);
  }
}

TEST(NeighborExchangeTest, LargeHalosDoNotDeadlock) {
  // Large messages are where a library stops buffering and a send waits for
  // its receiver: an exchange that relied on buffering hangs here.
  for (int p : {2, 3}) {
    DTW_TRACE("neighbour exchange, p " << p << ", large halos of 300000 doubles");
    try {
      check_exchange<double>(p, 300000, 300000);
    } catch (const NotImplemented&) {
      throw;  // a step not started yet is reported as such
    } catch (const Error& e) {
      // Also what the launch raises after the ranks returned (a request never
      // waited for), which carries no context of its own.
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(NeighborExchangeTest, SendsOneMessageToEachNeighbour) {
  for (int p : {3, 7}) {
    const std::size_t n = 10;
    DTW_TRACE("neighbour exchange traffic, p " << p << ", n 10 floats each way");
    const Report report = launch_bounded(p, [&](Comm& comm) {
      std::vector<float> a(n), b(n), c(n), d(n);
      exchange_with_neighbors<float>(comm, a, b, c, d);
    });
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst) {
        const bool neighbour = dst == (src + 1) % p || src == (dst + 1) % p;
        const char* rule = ": one message to each neighbour, nothing to anyone else";
        EXPECT_EQ(report.traffic.messages(src, dst), neighbour ? 1 : 0)
            << "p " << p << ", messages " << src << "->" << dst << rule;
        EXPECT_EQ(report.traffic.bytes(src, dst), neighbour ? 40 : 0)
            << "p " << p << ", bytes " << src << "->" << dst << rule;
      }
  }
}

// Rank `odd` receives into a from_left buffer of `width` elements while its
// left neighbour sends 4; every other rank is consistent.
void run_mismatch(int p, int odd, std::size_t width) {
  launch_bounded(p, [&](Comm& comm) {
    const int r = comm.rank();
    std::vector<double> to_left(4), to_right(4), from_right(4);
    std::vector<double> from_left(r == odd ? width : 4);
    exchange_with_neighbors<double>(comm, to_left, to_right, from_left, from_right);
  });
}

TEST(NeighborExchangeTest, MismatchedHaloWidthNamesBothRanks) {
  for (std::size_t width : {2u, 6u}) {  // buffer too small, and too large
    DTW_TRACE("neighbour exchange, p 3, rank 1's from_left holds " << width
                                                                  << " while rank 0 sends 4");
    try {
      run_mismatch(3, 1, width);
      ADD_FAILURE() << "width " << width
                    << ": no error: after the wait, compare each receive's arrived count with its "
                       "buffer's size and raise InvalidArgument naming both ranks (check_arrived)";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    }
  }
}

TEST(UnsafeExchangeTest, DeadlocksAndShowsTheCycle) {
  // The tempting shift: every rank sends right with a blocking send, then
  // receives from the left. A blocking send returns once the receiver has
  // the data, so every rank waits for a neighbour that is itself in `send`.
  for (int p : {1, 2, 3, 7}) {
    try {
      launch_bounded(
          p,
          [](Comm& comm) {
            const int size = comm.size(), r = comm.rank();
            std::vector<float> out(8), in(8);
            comm.send(out, (r + 1) % size, 0);
            comm.recv(in, (r + size - 1) % size, 0);
          },
          std::chrono::seconds(10));
      ADD_FAILURE() << "p " << p << ": the blocking shift returned";
    } catch (const TimeoutError& e) {
      ADD_FAILURE() << "p " << p << ": timed out instead of detecting the deadlock: " << e.what();
    } catch (const DeadlockError& e) {
      EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos)
          << "p " << p << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace dtw::ch00
