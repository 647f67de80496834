// Step 01.4 (and 01.5): the in-place allgather of uneven chunks, and the
// in-place reduce-scatter it pairs with (chapter 04's ZeRO moves shards with
// the two). The algorithms are the learner's ring and recursive doubling; this
// checks the layout contract: chunk r of Chunks(n, p) is rank r's, whatever n.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(AllgatherInPlaceTest, "01.4");
DTW_TEST_STEPS(ReduceScatterInPlaceTest, "01.4", "01.5");

// Every rank's values for its own chunk of an n-element vector; the rest -1.
template <class T>
std::vector<T> owners_values(int rank, std::int64_t n, int p, bool only_mine) {
  const Chunks chunks(n, p);
  std::vector<T> v(static_cast<std::size_t>(n), T(-1));
  for (int q = 0; q < p; ++q) {
    if (only_mine && q != rank) continue;
    const std::vector<T> block = sweep::make_input<T>(q, chunks.size(q), ReduceOp::kSum);
    std::copy(block.begin(), block.end(), v.begin() + chunks.offset(q));
  }
  return v;
}

void sweep_in_place(AllgatherAlgo algo) {
  const std::string what = "allgather_in_place " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t n : sweep::counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        std::vector<T> got = owners_values<T>(r, n, p, /*only_mine=*/true);
        allgather_in_place(comm, std::span<T>(got), algo);
        check.same(owners_values<T>(r, n, p, false), got, 0, sweep::describe<T>(what.c_str(), p, n));
      }
    });
  });
}

TEST(AllgatherInPlaceTest, RingGathersUnevenChunks) {
  sweep_in_place(AllgatherAlgo::kRing);
}

TEST(AllgatherInPlaceTest, RecursiveDoublingGathersUnevenChunks) {
  sweep_in_place(AllgatherAlgo::kRecursiveDoubling);
}

TEST(ReduceScatterInPlaceTest, ThenAllgatherInPlaceIsAnAllreduce) {
  sweep::on_every_world(
      [](Comm& comm) {
        const int p = comm.size(), r = comm.rank();
        for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3 * p + 1}}) {
          DTW_TRACE("reduce_scatter ring in place, then allgather_in_place ring, p "
                    << p << ", count " << n);
          std::vector<double> data = sweep::make_input<double>(r, n, ReduceOp::kSum);
          std::vector<double> expected = data;
          reference::allreduce(comm, expected, ReduceOp::kSum);
          const std::span<double> all(data);
          reduce_scatter(comm, all, Chunks(n, p).of(all, r), ReduceOp::kSum);
          allgather_in_place(comm, all);
          DTW_EXPECT_SAME(r, expected, data, sweep::tolerance<double>(p, ReduceOp::kSum));
        }
      },
      {1, 2, 3, 5});
}

TEST(AllgatherInPlaceTest, RingSendsAllButTheRightNeighboursChunk) {
  // In step s rank r forwards chunk r - s: over p-1 steps every chunk but
  // r + 1's, which is the one it never holds before the last step.
  for (int p : {2, 3, 5}) {
    DTW_TRACE("allgather_in_place ring traffic, p " << p
                                                   << ": each rank sends every chunk but its right "
                                                      "neighbour's, only to that neighbour");
    const std::int64_t n = 3 * p + 2;
    const Report report = dtw::testing::launch_bounded(p, [n](Comm& comm) {
      std::vector<float> data(static_cast<std::size_t>(n), 1.0f);
      allgather_in_place(comm, std::span<float>(data));
    });
    const Chunks chunks(n, p);
    for (int src = 0; src < p; ++src)
      for (int dst = 0; dst < p; ++dst)
        EXPECT_EQ(report.traffic.bytes(src, dst),
                  dst == (src + 1) % p ? (n - chunks.size(src + 1)) * 4 : 0)
            << "p " << p << ", " << src << " -> " << dst;
  }
}

}  // namespace
}  // namespace dtw::ch01
