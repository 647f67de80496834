// Steps 01.7-01.10: the five allreduce algorithms, each in its step's suite,
// swept over world sizes, counts, element types and ops against the backend's
// reference allreduce, in place and out of place. Every rank must also end
// with bit-identical results (data-parallel replicas would drift apart
// otherwise), and each algorithm's traffic has the shape its name promises.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

// Each allreduce also runs the steps it is built from (see the chapter text).
DTW_TEST_STEPS(AllreduceTreeTest, "01.1", "01.2", "01.7");
DTW_TEST_STEPS(AllreduceRingTest, "01.4", "01.5", "01.8");
DTW_TEST_STEPS(AllreduceRabenseifnerTest, "01.4", "01.5", "01.9");
DTW_TEST_STEPS(AllreduceDirectTest, "01.10");

// Out-of-place calls are checked for the small counts (the large count adds
// nothing the in-place call did not already exercise).
constexpr std::int64_t kOutOfPlaceLimit = 1000;

void sweep_allreduce(AllreduceAlgo algo) {
  const std::string what = "allreduce " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (ReduceOp op : sweep::kOps) {
        for (std::int64_t n : sweep::counts_for(p, sweep::runs_large<T>(p, op))) {
          const std::string context = sweep::describe<T>(what.c_str(), p, n, static_cast<int>(op));
          DTW_TRACE(context);
          const std::vector<T> in = sweep::make_input<T>(r, n, op);
          std::vector<T> expected = in;
          reference::allreduce(comm, expected, op);
          std::vector<T> got = in;
          allreduce(comm, std::span<T>(got), op, algo);
          check.same(expected, got, sweep::tolerance<T>(p, op), context);
          // Every rank holds the same bits as rank 0.
          std::vector<T> rank0 = got;
          reference::broadcast(comm, rank0, 0);
          check.same(rank0, got, 0, context + ", compared with rank 0's result");
          if (n <= kOutOfPlaceLimit) {
            std::vector<T> out(static_cast<std::size_t>(n), T(-7));
            allreduce(comm, std::span<const T>(in), std::span<T>(out), op, algo);
            check.same(got, out, 0, context + ", out of place");
          }
        }
      }
    });
  });
}

void count_mismatch_fails(AllreduceAlgo algo) {
  sweep::expect_count_mismatch_fails(
      "allreduce " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
        std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
        allreduce(c, std::span<float>(d), ReduceOp::kSum, algo);
      });
}

// Bytes rank src sent to rank dst, for a float allreduce of n elements.
Report allreduce_traffic(int p, std::int64_t n, AllreduceAlgo algo) {
  return dtw::testing::launch_bounded(p, [n, algo](Comm& comm) {
    std::vector<float> data(static_cast<std::size_t>(n), 1.0f);
    allreduce(comm, std::span<float>(data), ReduceOp::kSum, algo);
  });
}

TEST(AllreduceTreeTest, NaiveMatchesReference) {
  sweep_allreduce(AllreduceAlgo::kNaive);
}

TEST(AllreduceTreeTest, BinomialMatchesReference) {
  sweep_allreduce(AllreduceAlgo::kBinomial);
}

TEST(AllreduceTreeTest, CountThatDiffersFailsWithoutTheCheck) {
  count_mismatch_fails(AllreduceAlgo::kNaive);
  count_mismatch_fails(AllreduceAlgo::kBinomial);
}

TEST(AllreduceTreeTest, NaiveRootCarriesEveryonesData) {
  // The parameter-server pattern: the root's links carry (p-1)·n each way.
  for (int p : {3, 5}) {
    DTW_TRACE("allreduce naive traffic, p " << p << ": (p-1)·n into the server and out of it");
    const std::int64_t n = 100;
    const Report report = allreduce_traffic(p, n, AllreduceAlgo::kNaive);
    std::int64_t into_root = 0, out_of_root = 0;
    for (int q = 1; q < p; ++q) {
      into_root += report.traffic.bytes(q, 0);
      out_of_root += report.traffic.bytes(0, q);
    }
    EXPECT_EQ(into_root, (p - 1) * n * 4) << "p " << p;
    EXPECT_EQ(out_of_root, (p - 1) * n * 4) << "p " << p;
  }
}

TEST(AllreduceRingTest, MatchesReference) {
  sweep_allreduce(AllreduceAlgo::kRing);
}

TEST(AllreduceRingTest, CountThatDiffersFailsWithoutTheCheck) {
  count_mismatch_fails(AllreduceAlgo::kRing);
}

TEST(AllreduceRingTest, WrongBufferSizeNamesTheRank) {
  // The default algorithm is the ring.
  sweep::expect_wrong_size_names_rank("allreduce out of place", [](Comm& c) {
    std::vector<float> in(8), out(c.rank() == 1 ? 7 : 8);
    allreduce(c, std::span<const float>(in), std::span<float>(out), ReduceOp::kSum);
  });
}

TEST(AllreduceRingTest, SendsTwoLapsOfChunksToTheRightOnly) {
  // Reduce-scatter then allgather: each chunk travels p-1 hops in each phase,
  // so the ring carries 2(p-1)·n elements in all, only between neighbours.
  for (int p : {2, 3, 7, 8}) {
    DTW_TRACE("allreduce ring traffic, p " << p << ": 2(p-1)·n elements in all, to r + 1 only");
    const std::int64_t n = 10 * p + 3;
    const Report report = allreduce_traffic(p, n, AllreduceAlgo::kRing);
    std::int64_t total = 0;
    for (int src = 0; src < p; ++src) {
      for (int dst = 0; dst < p; ++dst) {
        if (dst != (src + 1) % p) {
          EXPECT_EQ(report.traffic.bytes(src, dst), 0) << src << " -> " << dst;
        }
        total += report.traffic.bytes(src, dst);
      }
    }
    EXPECT_EQ(total, 2 * (p - 1) * n * 4) << "p " << p;
  }
}

TEST(AllreduceRabenseifnerTest, MatchesReference) {
  sweep_allreduce(AllreduceAlgo::kRabenseifner);
}

TEST(AllreduceRabenseifnerTest, CountThatDiffersFailsWithoutTheCheck) {
  count_mismatch_fails(AllreduceAlgo::kRabenseifner);
}

TEST(AllreduceRabenseifnerTest, PowerOfTwoSendsTheRingsBytesInLgPSteps) {
  // With p a power of two, each rank sends n(p-1)/p elements while halving and
  // the same while doubling, in lg p messages each, to partners r xor 2^k.
  for (int p : {2, 4, 8}) {
    DTW_TRACE("allreduce rabenseifner traffic, p " << p
                                                  << ": 2n(p-1)/p elements per rank in 2 lg p "
                                                     "messages, to partners r xor 2^k only");
    int lg = 0;
    while ((1 << lg) < p) ++lg;
    const std::int64_t n = 16 * p;
    const Report report = allreduce_traffic(p, n, AllreduceAlgo::kRabenseifner);
    for (int src = 0; src < p; ++src) {
      std::int64_t bytes = 0, messages = 0;
      for (int dst = 0; dst < p; ++dst) {
        const int x = src ^ dst;
        const bool partner = x != 0 && (x & (x - 1)) == 0;
        if (!partner) {
          EXPECT_EQ(report.traffic.bytes(src, dst), 0) << src << " -> " << dst;
        }
        bytes += report.traffic.bytes(src, dst);
        messages += report.traffic.messages(src, dst);
      }
      EXPECT_EQ(bytes, 2 * n * (p - 1) / p * 4) << "p " << p << ", rank " << src;
      EXPECT_EQ(messages, 2 * lg) << "p " << p << ", rank " << src;
    }
  }
}

TEST(AllreduceDirectTest, MatchesReference) {
  sweep_allreduce(AllreduceAlgo::kDirect);
}

TEST(AllreduceDirectTest, CountThatDiffersFailsWithoutTheCheck) {
  count_mismatch_fails(AllreduceAlgo::kDirect);
}

TEST(AllreduceDirectTest, EveryRankSendsEachPeerItsChunk) {
  // Each rank sends chunk j straight to rank j to be reduced there (n/p
  // elements to every peer), then the reduced chunks are allgathered: 2(p-1)·n
  // elements in all, as for the ring.
  for (int p : {2, 3, 5}) {
    DTW_TRACE("allreduce direct traffic, p " << p
                                            << ": at least a chunk between every pair, 2(p-1)·n "
                                               "elements in all");
    const std::int64_t n = 8 * p;
    const Report report = allreduce_traffic(p, n, AllreduceAlgo::kDirect);
    std::int64_t total = 0;
    for (int src = 0; src < p; ++src) {
      for (int dst = 0; dst < p; ++dst) {
        if (src != dst) {
          EXPECT_GE(report.traffic.bytes(src, dst), 8 * 4) << src << " -> " << dst;
        }
        total += report.traffic.bytes(src, dst);
      }
    }
    EXPECT_EQ(total, 2 * (p - 1) * n * 4) << "p " << p;
  }
}

}  // namespace
}  // namespace dtw::ch01
