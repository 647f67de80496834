// Step 01.4: allgather (ring, recursive doubling) swept over world sizes,
// per-rank counts and element types against the backend's reference.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(AllgatherTest, "01.4");

void sweep_allgather(AllgatherAlgo algo) {
  const std::string what = "allgather " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t m : sweep::block_counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        const std::string context = sweep::describe<T>(what.c_str(), p, m);
        DTW_TRACE(context);
        const std::vector<T> in = sweep::make_input<T>(r, m, ReduceOp::kSum);
        std::vector<T> expected(static_cast<std::size_t>(p * m), T(-7)), got = expected;
        reference::allgather(comm, in, expected);
        allgather(comm, std::span<const T>(in), std::span<T>(got), algo);
        check.same(expected, got, 0, context);
      }
    });
  });
}

TEST(AllgatherTest, RingMatchesReference) {
  sweep_allgather(AllgatherAlgo::kRing);
}

TEST(AllgatherTest, RecursiveDoublingMatchesReference) {
  sweep_allgather(AllgatherAlgo::kRecursiveDoubling);
}

TEST(AllgatherTest, CountThatDiffersFailsWithoutTheCheck) {
  for (auto algo : {AllgatherAlgo::kRing, AllgatherAlgo::kRecursiveDoubling})
    sweep::expect_count_mismatch_fails(
        "allgather " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
          std::vector<float> in(static_cast<std::size_t>(n)),
              out(static_cast<std::size_t>(n * c.size()));
          allgather(c, std::span<const float>(in), std::span<float>(out), algo);
        });
}

TEST(AllgatherTest, WrongBufferSizeNamesTheRank) {
  sweep::expect_wrong_size_names_rank("allgather out", [](Comm& c) {
    std::vector<float> in(5), out(5 * c.size() - (c.rank() == 1 ? 1 : 0));
    allgather(c, std::span<const float>(in), std::span<float>(out));
  });
}

TEST(AllgatherTest, InPlaceWhenInIsThisRanksBlockOfOut) {
  for (int p : {1, 4, 5}) {
    for (AllgatherAlgo algo : {AllgatherAlgo::kRing, AllgatherAlgo::kRecursiveDoubling}) {
      dtw::testing::launch_bounded(p, [algo](Comm& comm) {
        const std::int64_t m = 3;
        std::vector<double> out(static_cast<std::size_t>(comm.size() * m), -1.0), want;
        for (int q = 0; q < comm.size(); ++q) {
          const auto block = sweep::make_input<double>(q, m, ReduceOp::kSum);
          want.insert(want.end(), block.begin(), block.end());
        }
        const auto mine = sweep::make_input<double>(comm.rank(), m, ReduceOp::kSum);
        std::copy(mine.begin(), mine.end(), out.begin() + comm.rank() * m);
        const std::span<double> all(out);
        allgather(comm, std::span<const double>(all.subspan(comm.rank() * m, m)), all, algo);
        DTW_EXPECT_SAME(comm.rank(), want, out);
      });
    }
  }
}

TEST(AllgatherTest, RingOnlyTalksToNeighbours) {
  // Each rank sends p-1 blocks, all to its right neighbour: (p-1)·m elements.
  for (int p : {2, 3, 7}) {
    DTW_TRACE("allgather ring traffic, p " << p << ": p-1 blocks per rank, to r + 1 only");
    const std::int64_t m = 10;
    const Report report = dtw::testing::launch_bounded(p, [m](Comm& comm) {
      const std::vector<float> in(m, 1.0f);
      std::vector<float> out(static_cast<std::size_t>(comm.size() * m));
      allgather(comm, std::span<const float>(in), std::span<float>(out), AllgatherAlgo::kRing);
    });
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst)
        EXPECT_EQ(report.traffic.bytes(src, dst), dst == (src + 1) % p ? (p - 1) * m * 4 : 0)
            << "p " << p << ", " << src << " -> " << dst;
  }
}

}  // namespace
}  // namespace dtw::ch01
