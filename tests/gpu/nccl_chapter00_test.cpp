// Chapter 00's solutions on the nccl backend, unchanged: they keep their data
// in host memory (std::vector, a stack array), which the backend stages
// through each rank's GPU. Every world size from 1 (or 2) to the number of
// GPUs (at most 8); the results and the traffic matrix are checked exactly.
// Needs at least 2 GPUs (the exchange on distinct neighbours 3).
#include <algorithm>
#include <string>
#include <vector>

#include "dtw_test.h"
#include "gpu_test.h"
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using testing::DeviceArray;

LaunchOptions nccl_options() {
  LaunchOptions options;
  options.backend = "nccl";
  options.timeout = std::chrono::seconds(60);
  return options;
}

int max_world() { return std::min(testing::cuda_devices(nullptr), 8); }

TEST(NcclChapter00Test, PingPongReturnsOneSamplePerSizeAndCountsEveryMessage) {
  DTW_REQUIRE_GPUS(2);
  const std::vector<std::int64_t> sizes{0, 1, 1000, 1 << 16};
  const int repeats = 3;
  for (int p = 2; p <= max_world(); ++p) {
    // Initiator on the last rank, so rank 0 is not special; bystanders from p = 3.
    const int a = p - 1, b = 0;
    const Report report = launch(p, nccl_options(), [&](Comm& comm) {
      const std::vector<PingPongSample> got = ping_pong(comm, sizes, repeats, a, b);
      if (comm.rank() != a) {
        EXPECT_TRUE(got.empty()) << "p " << p << ", rank " << comm.rank();
        return;
      }
      ASSERT_EQ(got.size(), sizes.size()) << "p " << p;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(got[i].bytes, sizes[i]) << "p " << p << ", sample " << i;
        EXPECT_GT(got[i].round_trip_seconds, 0) << "p " << p << ", sample " << i;
      }
    });
    // Per size one warm-up and `repeats` timed round trips, one message each way.
    std::int64_t bytes = 0;
    for (std::int64_t n : sizes) bytes += n * (repeats + 1);
    const auto messages = static_cast<std::int64_t>(sizes.size()) * (repeats + 1);
    EXPECT_EQ(report.traffic.messages(a, b), messages) << "p " << p;
    EXPECT_EQ(report.traffic.messages(b, a), messages) << "p " << p;
    EXPECT_EQ(report.traffic.bytes(a, b), bytes) << "p " << p;
    EXPECT_EQ(report.traffic.bytes(b, a), bytes) << "p " << p;
    EXPECT_EQ(report.total_bytes(), 2 * bytes) << "p " << p << ": a bystander sent something";
  }
}

TEST(NcclChapter00Test, TokenRingGivesEveryRankTheFinalToken) {
  DTW_REQUIRE_GPUS(2);
  for (int p = 1; p <= max_world(); ++p) {
    for (int laps : {0, 1, 3}) {
      const std::int64_t start = std::int64_t{1} << 40;  // beyond 32 bits: the full int64 moves
      const std::int64_t want = start + static_cast<std::int64_t>(laps) * p * (p + 1) / 2;
      const Report report = launch(p, nccl_options(), [&](Comm& comm) {
        EXPECT_EQ(token_ring(comm, start, laps), want) << "rank " << comm.rank() << " of " << p
                                                       << ", " << laps << " laps";
      });
      // One 8-byte token per link and lap, plus the result along 0 -> ... -> p-1.
      for (int src = 0; src < p && p > 1; ++src) {
        const int dst = (src + 1) % p;
        const std::int64_t want_messages = laps + (src != p - 1 ? 1 : 0);
        EXPECT_EQ(report.traffic.messages(src, dst), want_messages)
            << "p " << p << ", " << src << "->" << dst;
        EXPECT_EQ(report.traffic.bytes(src, dst), 8 * want_messages)
            << "p " << p << ", " << src << "->" << dst;
      }
    }
  }
}

// What rank r sends in direction dir (0 = left, 1 = right) at index i: unique
// per (rank, direction, index), so a halo from the wrong neighbour or the
// wrong direction fails.
template <class T>
std::vector<T> halo(int r, int dir, std::size_t n) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(r * 4096 + dir * 2048 + static_cast<int>(i % 2048));
  return out;
}

// The exchange on host buffers (staged) and on device buffers (NCCL's own
// path), for halo widths n_left (sent left) and n_right (sent right).
template <class T>
void check_exchange(int p, std::size_t n_left, std::size_t n_right) {
  launch(p, nccl_options(), [&](Comm& comm) {
    const int r = comm.rank(), left = (r + p - 1) % p, right = (r + 1) % p;
    const std::string where = "p " + std::to_string(p) + ", widths " + std::to_string(n_left) + "/" +
                              std::to_string(n_right);
    const std::vector<T> to_left = halo<T>(r, 0, n_left), to_right = halo<T>(r, 1, n_right);
    std::vector<T> from_left(n_right, T(-1)), from_right(n_left, T(-1));
    exchange_with_neighbors<T>(comm, to_left, to_right, from_left, from_right);
    EXPECT_EQ(testing::compare(r, halo<T>(left, 1, n_right), from_left), "") << "host, " << where;
    EXPECT_EQ(testing::compare(r, halo<T>(right, 0, n_left), from_right), "") << "host, " << where;

    DeviceArray<T> d_to_left(n_left), d_to_right(n_right), d_from_left(n_right), d_from_right(n_left);
    d_to_left.upload(to_left);
    d_to_right.upload(to_right);
    exchange_with_neighbors<T>(comm, std::span<const T>(d_to_left.span()), std::span<const T>(d_to_right.span()),
                               d_from_left.span(), d_from_right.span());
    EXPECT_EQ(testing::compare(r, halo<T>(left, 1, n_right), d_from_left.download()), "") << "device, " << where;
    EXPECT_EQ(testing::compare(r, halo<T>(right, 0, n_left), d_from_right.download()), "") << "device, " << where;
  });
}

TEST(NcclChapter00Test, NeighborExchangeDeliversEveryHalo) {
  DTW_REQUIRE_GPUS(3);  // from 3 ranks on, left and right are different ranks
  for (int p = 3; p <= max_world(); ++p) {
    for (std::size_t n : {0u, 1u, 1000u}) check_exchange<double>(p, n, n);
    check_exchange<std::int32_t>(p, 3, 5);
    check_exchange<float>(p, 17, 17);
  }
}

// With one or two ranks both neighbours are the same rank, and NCCL pairs the
// messages between two ranks by posting order, not by tag: this passes only
// if the solution posts its two sends in the order the peer posts the
// matching receives (see docs/gpu.md). Widths 3 and 5 make a swap a count
// mismatch, equal widths a wrong halo.
TEST(NcclChapter00Test, NeighborExchangeOfOneOrTwoRanksPairsByPostingOrder) {
  DTW_REQUIRE_GPUS(2);
  for (int p : {1, 2}) {
    check_exchange<double>(p, 1000, 1000);
    check_exchange<std::int32_t>(p, 3, 5);
  }
}

}  // namespace
}  // namespace dtw::ch00
