// Comm::copy_local and Comm::divide_local on the host backends: what chapter
// code uses instead of std::copy and a division loop, so that it runs on GPU
// memory too. Checked here against plain host arithmetic, with their errors.
#include <cstdint>
#include <numeric>
#include <vector>

#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

TEST(LocalOpsTest, CopyLocalCopiesEveryElement) {
  for (const std::size_t n : {0UL, 1UL, 7UL, 1000UL}) {
    launch_bounded(3, [n](Comm& comm) {
      std::vector<double> src(n), dst(n, -1.0);
      std::iota(src.begin(), src.end(), comm.rank() * 0.5);
      comm.copy_local(dst, src);
      EXPECT_EQ(testing::compare(comm.rank(), src, dst), "");
    });
  }
}

TEST(LocalOpsTest, CopyLocalOntoItselfIsNoop) {
  launch_bounded(1, [](Comm& comm) {
    std::vector<std::int32_t> v{3, 1, 4, 1, 5};
    const std::vector<std::int32_t> before = v;
    comm.copy_local(v, v);
    EXPECT_EQ(testing::compare(0, before, v), "");
  });
}

TEST(LocalOpsTest, CopyLocalWithDifferentCountsIsInvalidArgument) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<float> src(5), dst(4);
    EXPECT_THROW(comm.copy_local(dst, src), InvalidArgument);
    std::vector<std::int64_t> wide(5);
    EXPECT_THROW(comm.copy_local(Buffer{wide.data(), 5, DataType::kInt64},
                                 ConstBuffer{src.data(), 5, DataType::kFloat32}),
                 InvalidArgument);
  });
}

TEST(LocalOpsTest, DivideLocalMatchesHostDivision) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<std::int32_t> ints{-7, -1, 0, 1, 6, 7, 100};
    std::vector<std::int32_t> want_ints;
    for (std::int32_t x : ints) want_ints.push_back(x / 3);  // truncates toward zero
    comm.divide_local(ints, 3);
    EXPECT_EQ(testing::compare(comm.rank(), want_ints, ints), "");
    std::vector<double> reals{1.0, -2.5, 9.0};
    comm.divide_local(reals, 4);
    EXPECT_EQ(testing::compare(comm.rank(), std::vector<double>{0.25, -0.625, 2.25}, reals), "");
    std::vector<float> empty;
    comm.divide_local(empty, 5);  // count 0: nothing to do, no error
  });
}

TEST(LocalOpsTest, DivideLocalRejectsBadDivisorAndBytes) {
  launch_bounded(1, [](Comm& comm) {
    std::vector<float> v(3, 1.0f);
    EXPECT_THROW(comm.divide_local(v, 0), InvalidArgument);
    EXPECT_THROW(comm.divide_local(v, -2), InvalidArgument);
    std::vector<std::byte> bytes(4);
    EXPECT_THROW(comm.divide_local(bytes, 2), InvalidArgument);
  });
}

TEST(LocalOpsTest, ReduceLocalMatchesTheKernelAndRejectsMismatches) {
  launch_bounded(2, [](Comm& comm) {
    std::vector<std::int64_t> acc{1, -2, 3, 4}, in{5, 6, -7, 8};
    comm.reduce_local(acc, in, ReduceOp::kMax);
    EXPECT_EQ(acc, (std::vector<std::int64_t>{5, 6, 3, 8}));
    comm.reduce_local(acc, in, ReduceOp::kSum);
    EXPECT_EQ(acc, (std::vector<std::int64_t>{10, 12, -4, 16}));
    std::vector<std::int64_t> three(3);
    EXPECT_THROW(comm.reduce_local(acc, three, ReduceOp::kSum), InvalidArgument);
    std::vector<std::byte> bytes(4);
    EXPECT_THROW(comm.reduce_local(bytes, bytes, ReduceOp::kSum), InvalidArgument);
  });
}

}  // namespace
}  // namespace dtw
