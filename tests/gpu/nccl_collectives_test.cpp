// Every chapter 01 algorithm on the nccl backend against NCCL's own collective,
// for every world size from 2 to the number of GPUs (at most 8). The buffers
// are plain device memory (cudaMalloc): the solutions never touch their data
// from the host (local copies and the division of an average go through
// Comm::copy_local and Comm::divide_local), and this test proves it. Results
// are copied to the host explicitly for the comparison. Needs at least 2 GPUs.
#include <algorithm>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtw_test.h"
#include "gpu_test.h"

namespace dtw::ch01 {
namespace {

using testing::DeviceArray;
using testing::to_device;

template <class T>
std::vector<T> input(int rank, std::int64_t n) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<T>((i * 3 + rank * 7) % 11 - 5);
  return v;
}

std::vector<std::int64_t> counts(int p) { return {0, 1, p - 1, 3 * p + 1, 100'003}; }

// Runs `body(comm)` on every world size the machine can hold.
template <class F>
void on_gpu_worlds(F&& body) {
  const int gpus = std::min(testing::cuda_devices(nullptr), 8);
  for (int p = 2; p <= gpus; ++p) {
    LaunchOptions options;
    options.backend = "nccl";
    options.timeout = std::chrono::seconds(60);
    launch(p, options, body);
  }
}

template <class T>
void expect_same(int rank, const std::vector<T>& want, const std::vector<T>& got, const std::string& what) {
  const double tol = std::is_floating_point_v<T> ? 1e-5 : 0;
  const std::string diff = testing::compare(rank, want, got, tol);
  EXPECT_TRUE(diff.empty()) << what << ": " << diff;
}

template <class T>
void allreduce_all_algos(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  for (AllreduceAlgo algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                             AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      for (std::int64_t n : counts(p)) {
        const auto in = input<T>(r, n);
        auto want = to_device(in), got = to_device(in);
        reference::allreduce(comm, want.span(), op);
        allreduce(comm, got.span(), op, algo);
        expect_same(r, want.download(), got.download(),
                    "allreduce " + std::string(name_of(algo)) + " p=" + std::to_string(p) + " n=" + std::to_string(n));
      }
    }
    // Out of place: the copy of `in` into `out` happens on the device too.
    const auto in = to_device(input<T>(r, 3 * p + 1));
    auto want = to_device(input<T>(r, 3 * p + 1));
    DeviceArray<T> out(in.size());
    reference::allreduce(comm, want.span(), ReduceOp::kAvg);
    allreduce(comm, std::span<const T>(in.span()), out.span(), ReduceOp::kAvg, algo);
    expect_same(r, want.download(), out.download(), "out-of-place allreduce " + std::string(name_of(algo)));
  }
}

TEST(NcclCollectivesTest, AllreduceMatchesNccl) {
  DTW_REQUIRE_GPUS(2);
  on_gpu_worlds([](Comm& comm) {
    allreduce_all_algos<float>(comm);
    allreduce_all_algos<std::int64_t>(comm);
  });
}

TEST(NcclCollectivesTest, BroadcastAndReduceMatchNccl) {
  DTW_REQUIRE_GPUS(2);
  on_gpu_worlds([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    for (int root : {0, p - 1}) {
      for (std::int64_t n : counts(p)) {
        const auto in = input<float>(r, n);
        for (BroadcastAlgo algo : {BroadcastAlgo::kLinear, BroadcastAlgo::kBinomial, BroadcastAlgo::kScatterAllgather}) {
          auto want = to_device(in), got = to_device(in);
          reference::broadcast(comm, want.span(), root);
          broadcast(comm, got.span(), root, algo);
          expect_same(r, want.download(), got.download(), "broadcast " + std::string(name_of(algo)));
        }
        for (ReduceAlgo algo : {ReduceAlgo::kLinear, ReduceAlgo::kBinomial}) {
          auto want = to_device(in), got = to_device(in);
          reference::reduce(comm, want.span(), ReduceOp::kSum, root);
          reduce(comm, got.span(), ReduceOp::kSum, root, algo);
          if (r == root) expect_same(r, want.download(), got.download(), "reduce " + std::string(name_of(algo)));
        }
      }
    }
  });
}

TEST(NcclCollectivesTest, GatherFamilyMatchesNccl) {
  DTW_REQUIRE_GPUS(2);
  on_gpu_worlds([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    const auto up = static_cast<std::size_t>(p);
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3 * p + 1}, std::int64_t{33'334}}) {
      const auto mine = to_device(input<std::int64_t>(r, n));
      const auto nn = static_cast<std::size_t>(n);
      DeviceArray<std::int64_t> want(up * nn), got(up * nn);
      for (AllgatherAlgo algo : {AllgatherAlgo::kRing, AllgatherAlgo::kRecursiveDoubling}) {
        reference::allgather(comm, std::span<const std::int64_t>(mine.span()), want.span());
        allgather(comm, std::span<const std::int64_t>(mine.span()), got.span(), algo);
        expect_same(r, want.download(), got.download(), "allgather " + std::string(name_of(algo)));
      }
      const int root = p / 2;
      reference::gather(comm, std::span<const std::int64_t>(mine.span()), want.span(), root);
      gather(comm, std::span<const std::int64_t>(mine.span()), got.span(), root);
      if (r == root) expect_same(r, want.download(), got.download(), "gather");
      const auto all = to_device(input<std::int64_t>(r, n * p));
      DeviceArray<std::int64_t> s_want(nn), s_got(nn);
      reference::scatter(comm, std::span<const std::int64_t>(all.span()), s_want.span(), root);
      scatter(comm, std::span<const std::int64_t>(all.span()), s_got.span(), root);
      expect_same(r, s_want.download(), s_got.download(), "scatter");
      DeviceArray<std::int64_t> a_want(up * nn), a_got(up * nn);
      reference::alltoall(comm, std::span<const std::int64_t>(all.span()), a_want.span());
      alltoall(comm, std::span<const std::int64_t>(all.span()), a_got.span());
      expect_same(r, a_want.download(), a_got.download(), "alltoall");
    }
    barrier(comm);
  });
}

TEST(NcclCollectivesTest, ReduceScatterMatchesNccl) {
  DTW_REQUIRE_GPUS(2);
  on_gpu_worlds([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    for (std::int64_t n : counts(p)) {
      const Chunks chunks(n, p);
      const auto in = input<float>(r, n);
      for (ReduceScatterAlgo algo : {ReduceScatterAlgo::kRing, ReduceScatterAlgo::kRecursiveHalving}) {
        auto src = to_device(in), scratch = to_device(in);
        DeviceArray<float> want(static_cast<std::size_t>(chunks.size(r))),
            got(static_cast<std::size_t>(chunks.size(r)));
        reference::reduce_scatter(comm, std::span<const float>(src.span()), want.span(), ReduceOp::kSum);
        reduce_scatter(comm, scratch.span(), got.span(), ReduceOp::kSum, algo);
        expect_same(r, want.download(), got.download(), "reduce_scatter " + std::string(name_of(algo)));
      }
    }
  });
}

}  // namespace
}  // namespace dtw::ch01
