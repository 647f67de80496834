// Many ranks, many messages: random pairwise exchanges, barriers and a ring
// allgather on 64 threads, far more than there are cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

#ifdef DTW_TSAN
constexpr int kRounds = 4;  // TSan slows every access; fewer rounds, same patterns
#else
constexpr int kRounds = 30;
#endif

// Every rank derives the same pairing and sizes from the round number.
std::vector<int> pairing(int world, int round) {
  std::vector<int> order(static_cast<std::size_t>(world));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(static_cast<unsigned>(round) * 7919u + 1u);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> partner(static_cast<std::size_t>(world), -1);  // -1: sits out (odd world)
  for (int i = 0; i + 1 < world; i += 2) {
    partner[order[i]] = order[i + 1];
    partner[order[i + 1]] = order[i];
  }
  return partner;
}

std::size_t size_for(int round, int a, int b) {
  // 0 bytes up to ~1 MiB, the same on both sides of a pair.
  const unsigned lo = static_cast<unsigned>(std::min(a, b)), hi = static_cast<unsigned>(std::max(a, b));
  std::mt19937 rng(static_cast<unsigned>(round) * 131u + lo * 65537u + hi);
  const int shift = static_cast<int>(rng() % 19);
  return (std::size_t{1} << shift) - 1 + rng() % 3;
}

void exchange_rounds(Comm& comm) {
  for (int round = 0; round < kRounds; ++round) {
    const int partner = pairing(comm.size(), round)[comm.rank()];
    if (partner >= 0) {
      const std::size_t n = size_for(round, comm.rank(), partner);
      std::vector<std::int32_t> out(n, comm.rank() * 1000 + round), in(n, -1);
      if (round % 3 == 0) {
        comm.sendrecv(out, partner, in, partner, round);
      } else {
        // Non-blocking, and split into two messages on two tags.
        const std::size_t half = n / 2;
        std::vector<Request> reqs;
        reqs.push_back(comm.irecv(std::span(in).subspan(half), partner, 2));
        reqs.push_back(comm.isend(std::span<const std::int32_t>(out).first(half), partner, 1));
        reqs.push_back(comm.irecv(std::span(in).first(half), partner, 1));
        reqs.push_back(comm.isend(std::span<const std::int32_t>(out).subspan(half), partner, 2));
        comm.wait_all(reqs);
      }
      const std::int32_t expected = partner * 1000 + round;
      ASSERT_TRUE(std::all_of(in.begin(), in.end(), [&](std::int32_t v) { return v == expected; }))
          << "rank " << comm.rank() << ", round " << round << ", partner " << partner;
    }
    if (round % 5 == 4) comm.barrier();
  }
}

void ring_allgather(Comm& comm, std::size_t block) {
  const int p = comm.size(), r = comm.rank();
  std::vector<double> all(block * static_cast<std::size_t>(p), -1.0);
  std::fill_n(all.begin() + static_cast<std::ptrdiff_t>(block * r), block, r + 0.5);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const std::size_t out = static_cast<std::size_t>((r - s + p) % p) * block;
    const std::size_t in = static_cast<std::size_t>((r - s - 1 + 2 * p) % p) * block;
    comm.sendrecv(std::span<const double>(all).subspan(out, block), right,
                  std::span(all).subspan(in, block), left, 100);
  }
  for (int q = 0; q < p; ++q)
    ASSERT_EQ(all[block * static_cast<std::size_t>(q) + block - 1], q + 0.5)
        << "rank " << r << ", block " << q;
}

TEST(StressTest, SixtyFourRanksExchangeAndGather) {
  const Report report = launch_bounded(64, [](Comm& comm) {
    exchange_rounds(comm);
    comm.barrier();
    ring_allgather(comm, 1);
    ring_allgather(comm, 5000);
    comm.barrier();
  }, std::chrono::seconds(60));
  // Each rank sends 2 allgathers of 63 blocks around the ring.
  const std::int64_t ring_bytes = 63 * (1 + 5000) * 8;
  EXPECT_GE(report.traffic.bytes(5, 6), ring_bytes);
}

TEST(StressTest, OddWorldsRepeatedLaunches) {
  for (int world : {1, 3, 7, 13}) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      launch_bounded(world, [](Comm& comm) {
        exchange_rounds(comm);
        ring_allgather(comm, 33);
      });
    }
  }
}

}  // namespace
}  // namespace dtw
