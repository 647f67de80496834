// The default reference collectives (core/src/reference.cpp) against a plain
// sequential computation every rank does on its own: every rank can build every
// other rank's input, so the expected result needs no communication at all.
// Reductions must match bit for bit, floats included: the reference folds the
// contributions in rank order, ((x0 op x1) op x2) ..., and so does the check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/dtw.h"
#include "dtw/reference.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

const std::vector<int> kWorlds = {1, 2, 3, 5, 8};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

// Non-integer floats, so that a different summation order would show up as a
// different bit pattern; small integers so that nothing overflows.
template <class T>
std::vector<T> input(int rank, std::int64_t count, ReduceOp op) {
  std::vector<T> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t h = (rank + 3) * 7919 + i * 104729;
    if (op == ReduceOp::kProd) {
      v[static_cast<std::size_t>(i)] = static_cast<T>(h % 3 == 0 ? 2 : 1);
    } else if constexpr (std::is_integral_v<T>) {
      v[static_cast<std::size_t>(i)] = static_cast<T>(h % 41 - 20);
    } else {
      v[static_cast<std::size_t>(i)] = static_cast<T>(static_cast<double>(h % 2001 - 1000) / 997.0);
    }
  }
  return v;
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return static_cast<T>(a + b);
    case ReduceOp::kProd: return static_cast<T>(a * b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return a;
}

// What every reduction must produce: a left fold over ranks 0..p-1.
template <class T>
std::vector<T> folded(int p, std::int64_t count, ReduceOp op) {
  std::vector<T> acc = input<T>(0, count, op);
  for (int r = 1; r < p; ++r) {
    const std::vector<T> x = input<T>(r, count, op);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = combine(acc[i], x[i], op);
  }
  if (op == ReduceOp::kAvg)
    for (T& a : acc) a = static_cast<T>(a / static_cast<T>(p));
  return acc;
}

template <class F>
void for_each_type(F&& f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<std::int32_t>();
  f.template operator()<std::int64_t>();
}

TEST(ReferenceTest, AllreduceFoldsInRankOrder) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      for_each_type([&]<class T>() {
        for (ReduceOp op : kOps) {
          for (std::int64_t n : {0, 1, 7, 1000}) {
            std::vector<T> data = input<T>(comm.rank(), n, op);
            reference::allreduce(comm, data, op);
            SCOPED_TRACE(::testing::Message() << "p " << p << ", " << name_of(data_type_of<T>())
                                              << ", " << name_of(op) << ", count " << n);
            DTW_EXPECT_SAME(comm.rank(), folded<T>(p, n, op), data);
          }
        }
      });
    });
  }
}

TEST(ReferenceTest, ReduceLeavesTheFoldAtAnyRoot) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      for (int root = 0; root < p; ++root) {
        for (ReduceOp op : kOps) {
          std::vector<double> data = input<double>(comm.rank(), 33, op);
          reference::reduce(comm, data, op, root);
          if (comm.rank() == root) DTW_EXPECT_SAME(comm.rank(), folded<double>(p, 33, op), data);
        }
      }
    });
  }
}

TEST(ReferenceTest, BroadcastCopiesTheRootsData) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      for (int root = 0; root < p; ++root) {
        for (std::int64_t n : {0, 1, 100'003}) {
          std::vector<std::int64_t> data =
              comm.rank() == root ? input<std::int64_t>(root, n, ReduceOp::kSum)
                                  : std::vector<std::int64_t>(static_cast<std::size_t>(n), -1);
          reference::broadcast(comm, data, root);
          DTW_EXPECT_SAME(comm.rank(), input<std::int64_t>(root, n, ReduceOp::kSum), data);
        }
      }
    });
  }
}

TEST(ReferenceTest, GatherScatterAndAllgatherKeepRankOrder) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      const int r = comm.rank();
      for (std::int64_t n : {0, 1, 5}) {
        std::vector<float> all;
        for (int q = 0; q < p; ++q) {
          const auto x = input<float>(q, n, ReduceOp::kSum);
          all.insert(all.end(), x.begin(), x.end());
        }
        const auto mine = input<float>(r, n, ReduceOp::kSum);
        std::vector<float> out(all.size(), -1.0f);
        reference::allgather(comm, mine, out);
        DTW_EXPECT_SAME(r, all, out);
        for (int root = 0; root < p; ++root) {
          std::vector<float> gathered(r == root ? all.size() : 0, -1.0f);
          reference::gather(comm, mine, gathered, root);
          if (r == root) DTW_EXPECT_SAME(r, all, gathered);
          std::vector<float> piece(static_cast<std::size_t>(n), -1.0f);
          reference::scatter(comm, r == root ? all : std::vector<float>{}, piece, root);
          DTW_EXPECT_SAME(r, mine, piece);
        }
      }
    });
  }
}

TEST(ReferenceTest, ReduceScatterLeavesEachRankItsChunk) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      for (ReduceOp op : kOps) {
        for (std::int64_t n :
             {std::int64_t{0}, std::int64_t{1}, std::int64_t{p - 1}, std::int64_t{3 * p + 1}}) {
          const Chunks chunks(n, p);
          const auto whole = folded<std::int32_t>(p, n, op);
          const std::vector<std::int32_t> want(
              whole.begin() + chunks.offset(comm.rank()),
              whole.begin() + chunks.offset(comm.rank()) + chunks.size(comm.rank()));
          std::vector<std::int32_t> out(static_cast<std::size_t>(chunks.size(comm.rank())), -99);
          reference::reduce_scatter(comm, input<std::int32_t>(comm.rank(), n, op), out, op);
          DTW_EXPECT_SAME(comm.rank(), want, out);
        }
      }
    });
  }
}

TEST(ReferenceTest, AlltoallTransposesBlocks) {
  for (int p : kWorlds) {
    launch_bounded(p, [&](Comm& comm) {
      for (std::int64_t block : {0, 1, 3}) {
        // Element k of block j on rank i encodes (i, j, k).
        auto code = [&](int i, int j, std::int64_t k) { return i * 10000 + j * 100 + k; };
        std::vector<std::int64_t> in, want;
        for (int j = 0; j < p; ++j)
          for (std::int64_t k = 0; k < block; ++k) {
            in.push_back(code(comm.rank(), j, k));
            want.push_back(code(j, comm.rank(), k));
          }
        std::vector<std::int64_t> out(in.size(), -1);
        reference::alltoall(comm, in, out);
        DTW_EXPECT_SAME(comm.rank(), want, out);
      }
    });
  }
}

TEST(ReferenceTest, ResultIsBitwiseReproducible) {
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 3; ++run) {
    std::vector<float> result;
    launch_bounded(7, [&](Comm& comm) {
      std::vector<float> data = input<float>(comm.rank(), 4099, ReduceOp::kSum);
      reference::allreduce(comm, data, ReduceOp::kSum);
      if (comm.rank() == 3) result = data;
    });
    runs.push_back(result);
  }
  DTW_EXPECT_SAME(3, runs[0], runs[1]);
  DTW_EXPECT_SAME(3, runs[0], runs[2]);
}

TEST(ReferenceTest, RejectsARootOutOfRange) {
  for (int bad : {-1, 3}) {
    try {
      launch_bounded(3, [&](Comm& comm) {
        std::vector<float> data(4);
        reference::broadcast(comm, data, bad);
      });
      ADD_FAILURE() << "root " << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("root " + std::to_string(bad)), std::string::npos)
          << e.what();
    }
  }
}

TEST(ReferenceTest, RejectsCountsThatDifferBetweenRanks) {
  for (int p : {2, 3, 5}) {
    // The last rank brings one element too few or one too many.
    for (int extra : {-1, 1}) {
      EXPECT_THROW(launch_bounded(p,
                                  [&](Comm& comm) {
                                    std::vector<double> data(static_cast<std::size_t>(
                                        8 + (comm.rank() == p - 1 ? extra : 0)));
                                    reference::allreduce(comm, data, ReduceOp::kSum);
                                  }),
                   InvalidArgument)
          << "p " << p << ", extra " << extra;
    }
  }
}

TEST(ReferenceTest, RejectsAnOutputOfTheWrongSize) {
  try {
    launch_bounded(3, [](Comm& comm) {
      const std::vector<std::int32_t> in(4, 1);
      std::vector<std::int32_t> out(comm.rank() == 1 ? 11 : 12);
      reference::allgather(comm, in, out);
    });
    ADD_FAILURE() << "a short allgather output was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("11"), std::string::npos) << e.what();
  }
}

TEST(ReferenceTest, RejectsRawBytesInAReduction) {
  EXPECT_THROW(launch_bounded(2,
                              [](Comm& comm) {
                                std::vector<std::byte> data(4);
                                reference::allreduce(comm, data, ReduceOp::kSum);
                              }),
               InvalidArgument);
}

}  // namespace
}  // namespace dtw
