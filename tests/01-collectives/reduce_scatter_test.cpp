// Step 01.5: reduce-scatter (ring, recursive halving) swept over world sizes,
// counts (including counts below p and not divisible by p: chunks follow
// dtw::Chunks), element types and ops against the backend's reference.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(ReduceScatterTest, "01.4", "01.5");

void sweep_reduce_scatter(ReduceScatterAlgo algo) {
  const std::string what = "reduce_scatter " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (ReduceOp op : sweep::kOps) {
        for (std::int64_t n : sweep::counts_for(p, sweep::runs_large<T>(p, op))) {
          const std::string context =
              sweep::describe<T>(what.c_str(), p, n, static_cast<int>(op));
          DTW_TRACE(context);
          const Chunks chunks(n, p);
          std::vector<T> data = sweep::make_input<T>(r, n, op);
          std::vector<T> expected(static_cast<std::size_t>(chunks.size(r)), T(-7)), got = expected;
          reference::reduce_scatter(comm, data, expected, op);
          reduce_scatter(comm, std::span<T>(data), std::span<T>(got), op, algo);
          check.same(expected, got, sweep::tolerance<T>(p, op), context);
        }
      }
    });
  });
}

TEST(ReduceScatterTest, RingMatchesReference) {
  sweep_reduce_scatter(ReduceScatterAlgo::kRing);
}

TEST(ReduceScatterTest, RecursiveHalvingMatchesReference) {
  sweep_reduce_scatter(ReduceScatterAlgo::kRecursiveHalving);
}

TEST(ReduceScatterTest, CountThatDiffersFailsWithoutTheCheck) {
  for (auto algo : {ReduceScatterAlgo::kRing, ReduceScatterAlgo::kRecursiveHalving})
    sweep::expect_count_mismatch_fails(
        "reduce_scatter " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
          std::vector<float> d(static_cast<std::size_t>(n));
          std::vector<float> out(static_cast<std::size_t>(Chunks(n, c.size()).size(c.rank())));
          reduce_scatter(c, std::span<float>(d), std::span<float>(out), ReduceOp::kSum, algo);
        });
}

TEST(ReduceScatterTest, WrongBufferSizeNamesTheRank) {
  sweep::expect_wrong_size_names_rank("reduce_scatter out", [](Comm& c) {
    std::vector<float> d(5 * c.size()), out(c.rank() == 1 ? 6 : 5);
    reduce_scatter(c, std::span<float>(d), std::span<float>(out), ReduceOp::kSum);
  });
}

TEST(ReduceScatterTest, RingSendsEachChunkOnceAroundTheRing) {
  // p-1 steps, one chunk per step to the right neighbour: n(p-1)/p elements
  // per rank when p divides n.
  for (int p : {2, 4, 5}) {
    DTW_TRACE("reduce_scatter ring traffic, p " << p
                                               << ": n(p-1)/p elements per rank, to r + 1 only");
    const std::int64_t n = 20 * p;
    const Report report = dtw::testing::launch_bounded(p, [n](Comm& comm) {
      std::vector<std::int64_t> data(static_cast<std::size_t>(n), 1), out(20);
      reduce_scatter(comm, std::span<std::int64_t>(data), std::span<std::int64_t>(out),
                     ReduceOp::kSum, ReduceScatterAlgo::kRing);
      for (std::int64_t x : out) ASSERT_EQ(x, comm.size());
    });
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst)
        EXPECT_EQ(report.traffic.bytes(src, dst), dst == (src + 1) % p ? (p - 1) * 20 * 8 : 0)
            << "p " << p << ", " << src << " -> " << dst;
  }
}

}  // namespace
}  // namespace dtw::ch01
