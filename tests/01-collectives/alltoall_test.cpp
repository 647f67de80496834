// Step 01.11: all-to-all (pairwise exchange) swept over world sizes, block
// sizes and element types against the backend's reference all-to-all.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(AlltoallTest, "01.11");

TEST(AlltoallTest, PairwiseMatchesReference) {
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t b : sweep::block_counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        // Blocks of b elements: block j of rank r's input goes to rank j.
        const std::string context = sweep::describe<T>("alltoall pairwise", p, p * b);
        DTW_TRACE(context);
        const std::vector<T> in = sweep::make_input<T>(r, p * b, ReduceOp::kSum);
        std::vector<T> expected(in.size(), T(-7)), got = expected;
        reference::alltoall(comm, in, expected);
        alltoall(comm, std::span<const T>(in), std::span<T>(got));
        check.same(expected, got, 0, context);
      }
    });
  });
}

TEST(AlltoallTest, CountThatDiffersFailsWithoutTheCheck) {
  sweep::expect_count_mismatch_fails("alltoall pairwise", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n * c.size())), out(in.size());
    alltoall(c, std::span<const float>(in), std::span<float>(out));
  });
}

TEST(AlltoallTest, WrongBufferSizeNamesTheRank) {
  sweep::expect_wrong_size_names_rank("alltoall not divisible", [](Comm& c) {
    std::vector<float> in(5 * c.size() + (c.rank() == 1 ? 1 : 0)), out(in.size());
    alltoall(c, std::span<const float>(in), std::span<float>(out));
  });
}

TEST(AlltoallTest, EveryPairExchangesExactlyOneBlock) {
  for (int p : {2, 3, 6, 8}) {
    DTW_TRACE("alltoall pairwise traffic, p " << p << ": one block each way between every pair");
    const std::int64_t b = 5;
    const Report report = dtw::testing::launch_bounded(p, [b](Comm& comm) {
      const std::vector<std::int32_t> in(static_cast<std::size_t>(comm.size() * b), comm.rank());
      std::vector<std::int32_t> out(in.size());
      alltoall(comm, std::span<const std::int32_t>(in), std::span<std::int32_t>(out));
    });
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst)
        EXPECT_EQ(report.traffic.bytes(src, dst), src == dst ? 0 : b * 4)
            << "p " << p << ", " << src << " -> " << dst;
  }
}

}  // namespace
}  // namespace dtw::ch01
