// Step 01.3: gather and scatter (linear) swept over world sizes, per-rank
// counts, roots and element types against the backend's reference. Ranks
// other than the root pass an empty buffer where the contract allows it.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(GatherScatterTest, "01.3");

TEST(GatherScatterTest, GatherMatchesReference) {
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t m : sweep::block_counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        for (int root : sweep::roots_for(p)) {
          const std::string context = sweep::describe<T>("gather", p, m, -1, root);
          DTW_TRACE(context);
          const std::vector<T> in = sweep::make_input<T>(r, m, ReduceOp::kSum);
          const auto total = static_cast<std::size_t>(r == root ? p * m : 0);
          std::vector<T> expected(total, T(-7)), got(total, T(-7));
          reference::gather(comm, in, expected, root);
          gather(comm, std::span<const T>(in), std::span<T>(got), root);
          check.same(expected, got, 0, context);
        }
      }
    });
  });
}

TEST(GatherScatterTest, ScatterMatchesReference) {
  sweep::on_every_world([&](Comm& comm) {
    comm.set_verify_collectives(true);
    const int p = comm.size(), r = comm.rank();
    sweep::Checker check(r);
    sweep::for_each_type([&]<class T>() {
      for (std::int64_t m : sweep::block_counts_for(p, sweep::runs_large<T>(p, ReduceOp::kSum))) {
        for (int root : sweep::roots_for(p)) {
          const std::string context = sweep::describe<T>("scatter", p, m, -1, root);
          DTW_TRACE(context);
          const std::vector<T> in =
              r == root ? sweep::make_input<T>(root, p * m, ReduceOp::kSum) : std::vector<T>{};
          std::vector<T> expected(static_cast<std::size_t>(m), T(-7)), got = expected;
          reference::scatter(comm, in, expected, root);
          scatter(comm, std::span<const T>(in), std::span<T>(got), root);
          check.same(expected, got, 0, context);
        }
      }
    });
  });
}

TEST(GatherScatterTest, CountThatDiffersFailsWithoutTheCheck) {
  sweep::expect_count_mismatch_fails("gather", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n * c.size()));
    gather(c, std::span<const float>(in), std::span<float>(out), 0);
  });
  sweep::expect_count_mismatch_fails("scatter", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n * c.size())), out(static_cast<std::size_t>(n));
    scatter(c, std::span<const float>(in), std::span<float>(out), 0);
  });
}

TEST(GatherScatterTest, WrongBufferSizeNamesTheRank) {
  sweep::expect_wrong_size_names_rank("gather out at root", [](Comm& c) {
    std::vector<float> in(5), out(c.rank() == 1 ? 5 * c.size() + 2 : 0);
    gather(c, std::span<const float>(in), std::span<float>(out), 1);
  });
  sweep::expect_wrong_size_names_rank("scatter in at root", [](Comm& c) {
    std::vector<float> in(c.rank() == 1 ? 5 * c.size() - 3 : 0), out(5);
    scatter(c, std::span<const float>(in), std::span<float>(out), 1);
  });
}

TEST(GatherScatterTest, ScatterThenGatherRestoresTheRootsData) {
  for (int p : {1, 3, 8}) {
    dtw::testing::launch_bounded(p, [](Comm& comm) {
      const int root = comm.size() - 1;
      const std::vector<std::int64_t> original =
          sweep::make_input<std::int64_t>(root, 5 * comm.size(), ReduceOp::kSum);
      std::vector<std::int64_t> piece(5), back(comm.rank() == root ? original.size() : 0);
      scatter(comm, std::span<const std::int64_t>(comm.rank() == root ? original : back),
              std::span<std::int64_t>(piece), root);
      gather(comm, std::span<const std::int64_t>(piece), std::span<std::int64_t>(back), root);
      if (comm.rank() == root) DTW_EXPECT_SAME(comm.rank(), original, back);
    });
  }
}

}  // namespace
}  // namespace dtw::ch01
