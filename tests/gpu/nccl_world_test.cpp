// The nccl backend: launch errors, a world of one rank (self messages, grouped
// isend/irecv, recv_reduce through the CUDA kernel, barrier, split, NCCL's
// reference collectives, host memory staged through the device) and split
// through ncclCommSplit on every GPU. On a machine without a GPU only the
// "no CUDA device" check runs.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dtw_test.h"
#include "gpu_test.h"

namespace dtw {
namespace {

using testing::DeviceArray;

LaunchOptions nccl_options() {
  LaunchOptions options;
  options.backend = "nccl";
  options.timeout = std::chrono::seconds(30);
  return options;
}

TEST(NcclLaunchTest, NoDeviceGivesCudaError) {
  std::string why;
  if (testing::cuda_devices(&why) > 0) GTEST_SKIP() << "this machine has a CUDA device";
  try {
    launch(1, nccl_options(), [](Comm&) {});
    FAIL() << "launch with backend nccl on a machine without GPU did not throw";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(NcclLaunchTest, MoreRanksThanGpusIsInvalidArgument) {
  DTW_REQUIRE_GPUS(1);
  const int gpus = testing::cuda_devices(nullptr);
  EXPECT_THROW(launch(gpus + 1, nccl_options(), [](Comm&) {}), InvalidArgument);
}

TEST(NcclWorldOfOneTest, SelfMessagesAndRecvReduce) {
  DTW_REQUIRE_GPUS(1);
  launch(1, nccl_options(), [](Comm& comm) {
    EXPECT_STREQ(comm.backend(), "nccl");
    DeviceArray<float> a(1000), b(1000);
    std::vector<float> host(1000);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
    a.upload(host);
    // sendrecv to oneself: both halves go out in one NCCL group.
    comm.sendrecv(a.span(), 0, b.span(), 0, 5);
    EXPECT_EQ(testing::compare(0, host, b.download()), "");
    // isend queued, then recv_reduce: the receive's wait launches both together.
    Request r = comm.isend(std::span<const float>(a.data(), a.size()), 0, 6);
    comm.recv_reduce(b.span(), 0, ReduceOp::kSum, 6);
    comm.wait(r);
    std::vector<float> twice(host);
    for (float& x : twice) x *= 2;
    EXPECT_EQ(testing::compare(0, twice, b.download()), "");
    comm.barrier();
  });
}

TEST(NcclWorldOfOneTest, ReferenceCollectivesAndSplit) {
  DTW_REQUIRE_GPUS(1);
  launch(1, nccl_options(), [](Comm& comm) {
    DeviceArray<std::int64_t> d(17), out(17);
    std::vector<std::int64_t> host(17);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::int64_t>(i) - 5;
    d.upload(host);
    comm.reference_allreduce(Buffer{d.data(), 17, DataType::kInt64}, ReduceOp::kMax);
    comm.reference_broadcast(Buffer{d.data(), 17, DataType::kInt64}, 0);
    comm.reference_reduce_scatter(ConstBuffer{d.data(), 17, DataType::kInt64},
                                  Buffer{out.data(), 17, DataType::kInt64}, ReduceOp::kSum);
    EXPECT_EQ(testing::compare(0, host, out.download()), "");
    comm.reference_alltoall(ConstBuffer{d.data(), 17, DataType::kInt64}, Buffer{out.data(), 17, DataType::kInt64});
    EXPECT_EQ(testing::compare(0, host, out.download()), "");
    std::unique_ptr<Comm> sub = comm.split(3, 0);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), 1);
    sub->reference_allreduce(Buffer{d.data(), 17, DataType::kInt64}, ReduceOp::kSum);
    EXPECT_EQ(testing::compare(0, host, d.download()), "");
    EXPECT_EQ(comm.split(kNoColor, 0), nullptr);
  });
}

TEST(NcclWorldOfOneTest, CopyLocalAndDivideLocalRunOnTheDevice) {
  DTW_REQUIRE_GPUS(1);
  launch(1, nccl_options(), [](Comm& comm) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100'003}}) {
      std::vector<std::int32_t> host(n);
      for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::int32_t>(i % 97) - 40;
      DeviceArray<std::int32_t> a(n), b(n);
      a.upload(host);
      comm.copy_local(b.span(), std::span<const std::int32_t>(a.span()));
      EXPECT_EQ(testing::compare(0, host, b.download()), "");
      comm.divide_local(b.span(), 3);
      std::vector<std::int32_t> want(host);
      for (std::int32_t& x : want) x /= 3;  // the host rule: truncation toward zero
      EXPECT_EQ(testing::compare(0, want, b.download()), "");
      std::vector<double> reals(n);
      for (std::size_t i = 0; i < n; ++i) reals[i] = static_cast<double>(i) * 0.75 - 3.0;
      DeviceArray<double> d(n);
      d.upload(reals);
      comm.divide_local(d.span(), 6);
      for (double& x : reals) x /= 6;
      EXPECT_EQ(testing::compare(0, reals, d.download()), "");
    }
    std::vector<float> host(4, 1.0f);
    DeviceArray<float> dev(4);
    EXPECT_THROW(comm.copy_local(dev.span(), host), InvalidArgument);
    EXPECT_THROW(comm.divide_local(host, 2), InvalidArgument);
  });
}

TEST(NcclWorldOfOneTest, HostMemoryIsStagedThroughTheDevice) {
  DTW_REQUIRE_GPUS(1);
  launch(1, nccl_options(), [](Comm& comm) {
    std::vector<std::int64_t> host(1001), back(1001, -1);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = (std::int64_t{1} << 40) + static_cast<std::int64_t>(i);
    EXPECT_EQ(comm.sendrecv(host, 0, back, 0), 1001);
    EXPECT_EQ(testing::compare(0, host, back), "");
    // A host send to a device receive and back: either side may be staged alone.
    DeviceArray<std::int64_t> dev(1001);
    comm.sendrecv(host, 0, dev.span(), 0);
    EXPECT_EQ(testing::compare(0, host, dev.download()), "");
    std::fill(back.begin(), back.end(), -1);
    comm.sendrecv(std::span<const std::int64_t>(dev.span()), 0, back, 0);
    EXPECT_EQ(testing::compare(0, host, back), "");
    // recv_reduce into host memory reduces on the CPU after a staged receive.
    Request r = comm.isend(host, 0, 1);
    comm.recv_reduce(back, 0, ReduceOp::kSum, 1);
    comm.wait(r);
    std::vector<std::int64_t> twice(host);
    for (std::int64_t& x : twice) x *= 2;
    EXPECT_EQ(testing::compare(0, twice, back), "");
    // NCCL's collectives are not staged: host memory there is a clear error.
    EXPECT_THROW(comm.reference_allreduce(as_buffer(std::span<std::int64_t>(back)), ReduceOp::kSum),
                 InvalidArgument);
  });
}

// ncclCommSplit with every parent rank taking part: a reversed key order,
// and (from 3 GPUs) a rank that passes kNoColor.
TEST(NcclSplitTest, GroupsFollowColorAndKeyLikeTheOtherBackends) {
  DTW_REQUIRE_GPUS(2);
  const int p = std::min(testing::cuda_devices(nullptr), 8);
  launch(p, nccl_options(), [p](Comm& comm) {
    const int r = comm.rank();
    const bool out = p >= 3 && r == p - 1;
    std::unique_ptr<Comm> sub = comm.split(out ? kNoColor : r % 2, -r);
    if (out) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    // Members of my color, in descending parent rank (key -r), the outsider left out.
    std::vector<int> members;
    for (int q = p - 1; q >= 0; --q)
      if (q % 2 == r % 2 && !(p >= 3 && q == p - 1)) members.push_back(q);
    ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
    EXPECT_EQ(sub->world_rank_of(sub->rank()), r);
    for (int i = 0; i < sub->size(); ++i) EXPECT_EQ(sub->world_rank_of(i), members[i]);
    // NCCL's allreduce on the new communicator sums exactly the members' ranks.
    DeviceArray<std::int64_t> d(3);
    d.upload(std::vector<std::int64_t>(3, r));
    sub->reference_allreduce(Buffer{d.data(), 3, DataType::kInt64}, ReduceOp::kSum);
    std::int64_t want = 0;
    for (int q : members) want += q;
    EXPECT_EQ(testing::compare(r, std::vector<std::int64_t>(3, want), d.download()), "");
    sub->barrier();
  });
}

// Arrays and staged messages come from each GPU's default memory pool, which
// other GPUs may touch only once the pool grants them access (peer access
// does not cover pools); NCCL between the GPUs of one process reads and
// writes peer buffers directly. The backend grants it when a rank starts.
TEST(NcclWorldTest, EveryPeerGpuMayUseEachRanksMemoryPool) {
  DTW_REQUIRE_GPUS(2);
  const int p = std::min(testing::cuda_devices(nullptr), 8);
  launch(p, nccl_options(), [p](Comm& comm) {
    const int me = comm.exec().device();
    cudaMemPool_t pool = nullptr;
    DTW_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, me));
    for (int peer = 0; peer < p; ++peer) {
      int can = 0;
      DTW_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, peer, me));
      if (peer == me || !can) continue;
      cudaMemLocation where{};
      where.type = cudaMemLocationTypeDevice;
      where.id = peer;
      cudaMemAccessFlags flags{};
      DTW_CUDA_CHECK(cudaMemPoolGetAccess(&flags, pool, &where));
      EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite) << "GPU " << peer << " on GPU " << me << "'s pool";
    }
    // Pool memory moves between GPUs: a ring of device Arrays of 1 Mi floats.
    const int right = (comm.rank() + 1) % comm.size(), left = (comm.rank() + comm.size() - 1) % comm.size();
    Array<float> out(comm.exec(), 1 << 20), in(comm.exec(), 1 << 20);
    out.fill(static_cast<float>(comm.rank()) + 0.5f);
    in.fill(-1.0f);
    comm.sendrecv(out, right, in, left);
    EXPECT_EQ(in.to_vector(), std::vector<float>(1 << 20, static_cast<float>(left) + 0.5f));
  });
}

}  // namespace
}  // namespace dtw
