// Step 01.2: reduce (linear, binomial tree) swept over world sizes, counts,
// roots, element types and ops against the backend's reference reduce. Only
// the root's result is specified; the others' buffers are scratch.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(ReduceTest, "01.2");

void sweep_reduce(ReduceAlgo algo) {
  const std::string what = "reduce " + std::string(name_of(algo));
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (ReduceOp op : sweep::kOps) {
        for (std::int64_t n : sweep::counts_for(p, sweep::runs_large<T>(p, op))) {
          for (int root : sweep::roots_for(p)) {
            const std::string context =
                sweep::describe<T>(what.c_str(), p, n, static_cast<int>(op), root);
            DTW_TRACE(context);
            const std::vector<T> mine = sweep::make_input<T>(r, n, op);
            std::vector<T> expected = mine;
            reference::reduce(comm, expected, op, root);
            std::vector<T> got = mine;
            reduce(comm, std::span<T>(got), op, root, algo);
            if (r == root) {
              check.same(expected, got, sweep::tolerance<T>(p, op), context);
            }
          }
        }
      }
    });
  });
}

TEST(ReduceTest, LinearMatchesReference) {
  sweep_reduce(ReduceAlgo::kLinear);
}

TEST(ReduceTest, BinomialMatchesReference) {
  sweep_reduce(ReduceAlgo::kBinomial);
}

TEST(ReduceTest, CountThatDiffersFailsWithoutTheCheck) {
  for (auto algo : {ReduceAlgo::kLinear, ReduceAlgo::kBinomial})
    sweep::expect_count_mismatch_fails(
        "reduce " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
          std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
          reduce(c, std::span<float>(d), ReduceOp::kSum, 0, algo);
        });
}

TEST(ReduceTest, BinomialTreeSendsOneMessagePerRank) {
  // Every rank but the root sends its partial result exactly once, and the
  // root receives ceil(lg p) of them (the linear reduce's root receives p-1).
  for (int p : {2, 5, 8, 16}) {
    for (int root : {0, p - 1}) {
      DTW_TRACE("reduce binomial traffic, p " << p << ", root " << root
                                             << ": one send per rank, ceil(lg p) into the root");
      int lg = 0;
      while ((1 << lg) < p) ++lg;
      const Report report = dtw::testing::launch_bounded(p, [root](Comm& comm) {
        std::vector<double> data(32, 1.0);
        reduce(comm, std::span<double>(data), ReduceOp::kSum, root, ReduceAlgo::kBinomial);
      });
      std::int64_t root_receives = 0;
      for (int src = 0; src < p; ++src) {
        std::int64_t sent = 0;
        for (int dst = 0; dst < p; ++dst) sent += report.traffic.messages(src, dst);
        EXPECT_EQ(sent, src == root ? 0 : 1) << "p " << p << ", root " << root << ", rank " << src;
        root_receives += report.traffic.messages(src, root);
      }
      EXPECT_EQ(root_receives, lg) << "p " << p << ", root " << root;
    }
  }
}

}  // namespace
}  // namespace dtw::ch01
