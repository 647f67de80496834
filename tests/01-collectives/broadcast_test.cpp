// Steps 01.1 (broadcast: linear, binomial tree) and 01.6 (broadcast as a
// scatter followed by a ring allgather), swept over world sizes, counts, roots
// and element types against the backend's reference broadcast.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(BroadcastTest, "01.1");
// The scatter + allgather broadcast runs the ring allgather of step 01.4.
DTW_TEST_STEPS(BroadcastScatterAllgatherTest, "01.4", "01.6");

void sweep_broadcast(BroadcastAlgo algo) {
  const std::string what = "broadcast " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t n : sweep::counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        for (int root : sweep::roots_for(p)) {
          const std::string context = sweep::describe<T>(what.c_str(), p, n, -1, root);
          DTW_TRACE(context);
          // Only the root's data matters; the others start from a sentinel
          // that must be overwritten.
          const std::vector<T> mine = r == root
                                          ? sweep::make_input<T>(root, n, ReduceOp::kSum)
                                          : std::vector<T>(static_cast<std::size_t>(n), T(-7));
          std::vector<T> expected = mine;
          reference::broadcast(comm, expected, root);
          std::vector<T> got = mine;
          broadcast(comm, std::span<T>(got), root, algo);
          check.same(expected, got, 0, context);
        }
      }
    });
  });
}

TEST(BroadcastTest, LinearMatchesReference) {
  sweep_broadcast(BroadcastAlgo::kLinear);
}

TEST(BroadcastTest, BinomialMatchesReference) {
  sweep_broadcast(BroadcastAlgo::kBinomial);
}

TEST(BroadcastTest, CountThatDiffersFailsWithoutTheCheck) {
  for (auto algo : {BroadcastAlgo::kLinear, BroadcastAlgo::kBinomial})
    sweep::expect_count_mismatch_fails(
        "broadcast " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
          std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
          broadcast(c, std::span<float>(d), 0, algo);
        });
}

TEST(BroadcastTest, BinomialTreeRootSendsLgPMessages) {
  // In a binomial tree the root sends ceil(lg p) messages and every other rank
  // receives exactly one; the linear broadcast's root would send p-1.
  for (int p : {2, 5, 8, 16}) {
    DTW_TRACE("broadcast binomial traffic, p " << p
                                              << ", root 0: the root sends ceil(lg p) messages, "
                                                 "every other rank receives one");
    int lg = 0;
    while ((1 << lg) < p) ++lg;
    const Report report = dtw::testing::launch_bounded(p, [](Comm& comm) {
      std::vector<float> data(64, static_cast<float>(comm.rank()));
      broadcast(comm, std::span<float>(data), 0, BroadcastAlgo::kBinomial);
    });
    std::int64_t root_sends = 0;
    for (int dst = 0; dst < p; ++dst) root_sends += report.traffic.messages(0, dst);
    EXPECT_EQ(root_sends, lg) << "p " << p;
    for (int dst = 1; dst < p; ++dst) {
      std::int64_t received = 0;
      for (int src = 0; src < p; ++src) received += report.traffic.messages(src, dst);
      EXPECT_EQ(received, 1) << "p " << p << ", rank " << dst;
    }
  }
}

TEST(BroadcastScatterAllgatherTest, MatchesReference) {
  sweep_broadcast(BroadcastAlgo::kScatterAllgather);
}

TEST(BroadcastScatterAllgatherTest, CountThatDiffersFailsWithoutTheCheck) {
  sweep::expect_count_mismatch_fails("broadcast scatter_allgather", [](Comm& c, std::int64_t n) {
    std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
    broadcast(c, std::span<float>(d), 0, BroadcastAlgo::kScatterAllgather);
  });
}

TEST(BroadcastScatterAllgatherTest, RootSendsAboutOneCopyOfTheData) {
  // Scatter then allgather: the root sends each other rank's chunk once in the
  // scatter (n(p-1)/p elements, through a tree or directly) plus one chunk per
  // ring step; a linear broadcast would send (p-1)n. Bound: under 2n.
  for (int p : {4, 7, 8}) {
    DTW_TRACE("broadcast scatter-allgather traffic, p " << p
                                                       << ", root 0: the root sends less than 2n");
    const std::int64_t n = 1000 * p + 3;
    const Report report = dtw::testing::launch_bounded(p, [n](Comm& comm) {
      std::vector<std::int32_t> data(static_cast<std::size_t>(n), comm.rank());
      broadcast(comm, std::span<std::int32_t>(data), 0, BroadcastAlgo::kScatterAllgather);
    });
    std::int64_t root_bytes = 0;
    for (int dst = 0; dst < p; ++dst) root_bytes += report.traffic.bytes(0, dst);
    EXPECT_LT(root_bytes, 2 * n * 4) << "p " << p;
    EXPECT_GT(root_bytes, 0) << "p " << p;
  }
}

}  // namespace
}  // namespace dtw::ch01
