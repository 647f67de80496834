// Every chapter 01 algorithm on the threads backend with device buffers
// (LaunchOptions::device "cuda"): p = 1, 2, 3, 4 ranks sharing the machine's
// GPU(s), each rank with its own stream, the data in Arrays on comm.exec().
// Expected values are computed on the host from every rank's input (not
// with another collective), for counts 0, 1, p - 1, 3p + 1 (not divisible by
// p) and a large one. The reference collectives (staged through the host on
// this backend) are checked against the same values. Needs one GPU.
#include <algorithm>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "threads_device.h"

namespace dtw::ch01 {
namespace {

using testing::device_threads;
using testing::host_input;

std::vector<std::int64_t> counts(int p) {
  return {0, 1, p - 1, 3 * p + 1, 100'003};
}

// Runs `body(comm)` on worlds of 1, 2, 3 and 4 ranks sharing the GPU(s).
template <class F>
void on_worlds_of_one_to_four(F&& body) {
  for (int p = 1; p <= 4; ++p) launch(p, device_threads(), body);
}

// Element-wise reduction of every rank's host_input, as rank order would give
// it (the values are small integers, so every order gives the same floats).
template <class T>
std::vector<T> reduced(int p, std::int64_t n, ReduceOp op) {
  std::vector<T> out = host_input<T>(0, n);
  for (int r = 1; r < p; ++r) {
    const std::vector<T> in = host_input<T>(r, n);
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = op == ReduceOp::kMax ? std::max(out[i], in[i]) : static_cast<T>(out[i] + in[i]);
  }
  if (op == ReduceOp::kAvg)
    for (T& x : out) x = static_cast<T>(x / static_cast<T>(p));
  return out;
}

// Rank order, each rank's `n` elements after the other.
template <class T>
std::vector<T> concatenated(int p, std::int64_t n) {
  std::vector<T> out;
  for (int r = 0; r < p; ++r) {
    const std::vector<T> in = host_input<T>(r, n);
    out.insert(out.end(), in.begin(), in.end());
  }
  return out;
}

template <class T>
void expect_same(int rank, const std::vector<T>& want, const Array<T>& got,
                 const std::string& what) {
  const double tol = std::is_floating_point_v<T> ? 1e-5 : 0;
  const std::string diff = testing::compare(rank, want, got.to_vector(), tol);
  EXPECT_TRUE(diff.empty()) << what << ": " << diff;
}

template <class T>
void allreduce_all_algos(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  for (AllreduceAlgo algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                             AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      for (std::int64_t n : counts(p)) {
        const std::string what = "allreduce " + std::string(name_of(algo)) +
                                 " p=" + std::to_string(p) + " n=" + std::to_string(n);
        Array<T> got(comm.exec(), host_input<T>(r, n));
        allreduce(comm, got.span(), op, algo);
        expect_same(r, reduced<T>(p, n, op), got, what);
      }
    }
    // Out of place: the copy of `in` into `out` happens on the device too.
    const std::int64_t n = 3 * p + 1;
    const Array<T> in(comm.exec(), host_input<T>(r, n));
    Array<T> out(comm.exec(), n);
    allreduce(comm, std::span<const T>(in.span()), out.span(), ReduceOp::kAvg, algo);
    expect_same(r, reduced<T>(p, n, ReduceOp::kAvg), out,
                "out-of-place allreduce " + std::string(name_of(algo)));
  }
  Array<T> ref(comm.exec(), host_input<T>(r, 3 * p + 1));
  reference::allreduce(comm, ref.span(), ReduceOp::kSum);
  expect_same(r, reduced<T>(p, 3 * p + 1, ReduceOp::kSum), ref, "reference allreduce");
}

TEST(ThreadsDeviceCollectivesTest, AllreduceMatchesTheHostReference) {
  DTW_REQUIRE_GPUS(1);
  on_worlds_of_one_to_four([](Comm& comm) {
    allreduce_all_algos<float>(comm);
    allreduce_all_algos<std::int64_t>(comm);
  });
}

TEST(ThreadsDeviceCollectivesTest, BroadcastAndReduceMatchTheHostReference) {
  DTW_REQUIRE_GPUS(1);
  on_worlds_of_one_to_four([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    for (int root : {0, p - 1}) {
      for (std::int64_t n : counts(p)) {
        for (BroadcastAlgo algo :
             {BroadcastAlgo::kLinear, BroadcastAlgo::kBinomial, BroadcastAlgo::kScatterAllgather}) {
          Array<float> got(comm.exec(), host_input<float>(r, n));
          broadcast(comm, got.span(), root, algo);
          expect_same(r, host_input<float>(root, n), got,
                      "broadcast " + std::string(name_of(algo)));
        }
        for (ReduceAlgo algo : {ReduceAlgo::kLinear, ReduceAlgo::kBinomial}) {
          Array<float> got(comm.exec(), host_input<float>(r, n));
          reduce(comm, got.span(), ReduceOp::kSum, root, algo);
          if (r == root)
            expect_same(r, reduced<float>(p, n, ReduceOp::kSum), got,
                        "reduce " + std::string(name_of(algo)));
        }
        Array<float> ref(comm.exec(), host_input<float>(r, n));
        reference::broadcast(comm, ref.span(), root);
        expect_same(r, host_input<float>(root, n), ref, "reference broadcast");
      }
    }
  });
}

TEST(ThreadsDeviceCollectivesTest, GatherFamilyMatchesTheHostReference) {
  DTW_REQUIRE_GPUS(1);
  on_worlds_of_one_to_four([](Comm& comm) {
    const int p = comm.size(), r = comm.rank(), root = p / 2;
    for (std::int64_t n :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{3 * p + 1}, std::int64_t{33'334}}) {
      const Array<std::int64_t> mine(comm.exec(), host_input<std::int64_t>(r, n));
      const std::span<const std::int64_t> in(mine.span());
      const std::vector<std::int64_t> all = concatenated<std::int64_t>(p, n);
      for (AllgatherAlgo algo : {AllgatherAlgo::kRing, AllgatherAlgo::kRecursiveDoubling}) {
        Array<std::int64_t> got(comm.exec(), p * n);
        allgather(comm, in, got.span(), algo);
        expect_same(r, all, got, "allgather " + std::string(name_of(algo)));
      }
      Array<std::int64_t> gathered(comm.exec(), p * n), ref(comm.exec(), p * n);
      gather(comm, in, gathered.span(), root);
      if (r == root) expect_same(r, all, gathered, "gather");
      reference::allgather(comm, in, ref.span());
      expect_same(r, all, ref, "reference allgather");

      // Scatter and all-to-all: rank s's p * n elements are host_input(s, p * n).
      const Array<std::int64_t> blocks(comm.exec(), host_input<std::int64_t>(r, p * n));
      Array<std::int64_t> part(comm.exec(), n), swapped(comm.exec(), p * n);
      scatter(comm, std::span<const std::int64_t>(blocks.span()), part.span(), root);
      const std::vector<std::int64_t> roots = host_input<std::int64_t>(root, p * n);
      expect_same(r, std::vector<std::int64_t>(roots.begin() + r * n, roots.begin() + (r + 1) * n),
                  part, "scatter");
      alltoall(comm, std::span<const std::int64_t>(blocks.span()), swapped.span());
      std::vector<std::int64_t> want;
      for (int s = 0; s < p; ++s) {
        const std::vector<std::int64_t> theirs = host_input<std::int64_t>(s, p * n);
        want.insert(want.end(), theirs.begin() + r * n, theirs.begin() + (r + 1) * n);
      }
      expect_same(r, want, swapped, "alltoall");
    }
    barrier(comm);
  });
}

TEST(ThreadsDeviceCollectivesTest, ReduceScatterMatchesTheHostReference) {
  DTW_REQUIRE_GPUS(1);
  on_worlds_of_one_to_four([](Comm& comm) {
    const int p = comm.size(), r = comm.rank();
    for (std::int64_t n : counts(p)) {
      const Chunks chunks(n, p);
      const std::vector<float> sum = reduced<float>(p, n, ReduceOp::kSum);
      const std::vector<float> mine(sum.begin() + chunks.offset(r),
                                    sum.begin() + chunks.offset(r) + chunks.size(r));
      for (ReduceScatterAlgo algo :
           {ReduceScatterAlgo::kRing, ReduceScatterAlgo::kRecursiveHalving}) {
        Array<float> scratch(comm.exec(), host_input<float>(r, n)),
            got(comm.exec(), chunks.size(r));
        reduce_scatter(comm, scratch.span(), got.span(), ReduceOp::kSum, algo);
        expect_same(r, mine, got, "reduce_scatter " + std::string(name_of(algo)));
      }
      const Array<float> in(comm.exec(), host_input<float>(r, n));
      Array<float> ref(comm.exec(), chunks.size(r));
      reference::reduce_scatter(comm, std::span<const float>(in.span()), ref.span(),
                                ReduceOp::kSum);
      expect_same(r, mine, ref, "reference reduce_scatter");
    }
  });
}

}  // namespace
}  // namespace dtw::ch01
