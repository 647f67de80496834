// Bad input must end in a clear error naming the rank, never in a hang or a
// silent wrong answer. The checks here run before any algorithm does (in the
// dispatch code the skeleton already has): counts that differ between ranks
// with the fingerprint check on (CollectiveMismatch), roots out of range,
// ranks calling different collectives. With the check off, the algorithms'
// own size checks must catch differing counts and buffers of the wrong size:
// each algorithm's suite tests that (sweep::expect_count_mismatch_fails,
// sweep::expect_wrong_size_names_rank).
#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

DTW_TEST_STEPS(CollectiveArgumentsTest);

using RankCall = std::function<void(Comm&, std::int64_t count)>;

// One call per collective and algorithm, each taking the count to use.
std::vector<std::pair<std::string, RankCall>> every_collective() {
  std::vector<std::pair<std::string, RankCall>> calls;
  for (auto algo :
       {BroadcastAlgo::kLinear, BroadcastAlgo::kBinomial, BroadcastAlgo::kScatterAllgather})
    calls.emplace_back("broadcast " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
      std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
      broadcast(c, std::span<float>(d), 0, algo);
    });
  for (auto algo : {ReduceAlgo::kLinear, ReduceAlgo::kBinomial})
    calls.emplace_back("reduce " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
      std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
      reduce(c, std::span<float>(d), ReduceOp::kSum, 0, algo);
    });
  calls.emplace_back("gather", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n * c.size()));
    gather(c, std::span<const float>(in), std::span<float>(out), 0);
  });
  calls.emplace_back("scatter", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n * c.size())), out(static_cast<std::size_t>(n));
    scatter(c, std::span<const float>(in), std::span<float>(out), 0);
  });
  for (auto algo : {AllgatherAlgo::kRing, AllgatherAlgo::kRecursiveDoubling})
    calls.emplace_back("allgather " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
      std::vector<float> in(static_cast<std::size_t>(n)),
          out(static_cast<std::size_t>(n * c.size()));
      allgather(c, std::span<const float>(in), std::span<float>(out), algo);
    });
  for (auto algo : {ReduceScatterAlgo::kRing, ReduceScatterAlgo::kRecursiveHalving})
    calls.emplace_back(
        "reduce_scatter " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
          std::vector<float> d(static_cast<std::size_t>(n));
          std::vector<float> out(static_cast<std::size_t>(Chunks(n, c.size()).size(c.rank())));
          reduce_scatter(c, std::span<float>(d), std::span<float>(out), ReduceOp::kSum, algo);
        });
  for (auto algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                    AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect})
    calls.emplace_back("allreduce " + std::string(name_of(algo)), [algo](Comm& c, std::int64_t n) {
      std::vector<float> d(static_cast<std::size_t>(n), 1.0f);
      allreduce(c, std::span<float>(d), ReduceOp::kSum, algo);
    });
  calls.emplace_back("alltoall", [](Comm& c, std::int64_t n) {
    std::vector<float> in(static_cast<std::size_t>(n * c.size())), out(in.size());
    alltoall(c, std::span<const float>(in), std::span<float>(out));
  });
  return calls;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CollectiveArgumentsTest, CountThatDiffersIsACollectiveMismatchOnEveryRank) {
  constexpr int kP = 4;
  for (const auto& [name, call] : every_collective()) {
    std::vector<std::string> messages(kP);
    dtw::testing::launch_bounded(kP, [&, &call = call](Comm& comm) {
      comm.set_verify_collectives(true);
      try {
        call(comm, comm.rank() == 2 ? 11 : 10);
      } catch (const CollectiveMismatch& e) {
        messages[static_cast<std::size_t>(comm.rank())] = e.message();
      }
    });
    for (int r = 0; r < kP; ++r) {
      EXPECT_TRUE(contains(messages[r], "rank 2 called") &&
                  contains(messages[r], "ranks 0, 1, 3 called"))
          << name << ", rank " << r << ": '" << messages[r] << "'";
    }
  }
}

TEST(CollectiveArgumentsTest, RootOutOfRangeIsRejected) {
  const std::vector<std::pair<std::string, std::function<void(Comm&, int)>>> rooted = {
      {"broadcast",
       [](Comm& c, int root) {
         std::vector<double> d(4);
         broadcast(c, std::span<double>(d), root);
       }},
      {"reduce",
       [](Comm& c, int root) {
         std::vector<double> d(4);
         reduce(c, std::span<double>(d), ReduceOp::kMax, root);
       }},
      {"gather",
       [](Comm& c, int root) {
         std::vector<double> in(4), out(4 * c.size());
         gather(c, std::span<const double>(in), std::span<double>(out), root);
       }},
      {"scatter",
       [](Comm& c, int root) {
         std::vector<double> in(4 * c.size()), out(4);
         scatter(c, std::span<const double>(in), std::span<double>(out), root);
       }},
  };
  for (const auto& [name, call] : rooted) {
    for (int p : {1, 3}) {
      for (int root : {-1, p}) {
        for (bool check : {false, true}) {
          try {
            dtw::testing::launch_bounded(p, [&, &call = call](Comm& comm) {
              comm.set_verify_collectives(check);
              call(comm, root);
            });
            ADD_FAILURE() << name << " accepted root " << root << " on " << p << " ranks";
          } catch (const InvalidArgument& e) {
            EXPECT_TRUE(contains(e.what(), "root") && contains(e.what(), std::to_string(root)) &&
                        contains(e.what(), "rank "))
                << name << ": " << e.what();
          }
        }
      }
    }
  }
}

TEST(CollectiveArgumentsTest, DifferentCollectivesAreAMismatchNotAHang) {
  constexpr int kP = 4;
  std::vector<std::string> messages(kP);
  dtw::testing::launch_bounded(kP, [&](Comm& comm) {
    comm.set_verify_collectives(true);
    std::vector<float> data(1024, 1.0f);
    try {
      if (comm.rank() == 2) {
        broadcast(comm, std::span<float>(data), 0);
      } else {
        allreduce(comm, std::span<float>(data), ReduceOp::kSum);
      }
    } catch (const CollectiveMismatch& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.message();
    }
  });
  for (int r = 0; r < kP; ++r) {
    EXPECT_TRUE(contains(messages[r], "ranks 0, 1, 3 called allreduce") &&
                contains(messages[r], "rank 2 called broadcast") &&
                contains(messages[r], "count 1024"))
        << "rank " << r << ": '" << messages[r] << "'";
  }
}

TEST(CollectiveArgumentsTest, DifferentAlgorithmsAreAMismatch) {
  EXPECT_THROW(dtw::testing::launch_bounded(3,
                                            [](Comm& comm) {
                                              comm.set_verify_collectives(true);
                                              std::vector<double> d(12, 1.0);
                                              allreduce(comm, std::span<double>(d), ReduceOp::kSum,
                                                        comm.rank() == 0 ? AllreduceAlgo::kRing
                                                                         : AllreduceAlgo::kDirect);
                                            }),
               CollectiveMismatch);
}

// An op or algorithm cast from an integer outside its enum is refused by every
// collective before a message moves, naming the rank and the value; name_of
// says "?" for it instead of reading past its table.
TEST(CollectiveArgumentsTest, EnumOutOfRangeIsRejectedByEveryCollective) {
  const auto op = static_cast<ReduceOp>(7);
  const std::vector<std::pair<std::string, std::function<void(Comm&)>>> cases{
      {"allreduce: unknown ReduceOp 7",
       [&](Comm& c) {
         std::vector<float> d(6, 1.0f);
         allreduce(c, std::span<float>(d), op);
       }},
      {"reduce: unknown ReduceOp 7",
       [&](Comm& c) {
         std::vector<float> d(6, 1.0f);
         reduce(c, std::span<float>(d), op, 0);
       }},
      {"reduce_scatter: unknown ReduceOp 7",
       [&](Comm& c) {
         std::vector<float> d(6, 1.0f), out(2);
         reduce_scatter(c, std::span<float>(d), std::span<float>(out), op);
       }},
      {"reduce: unknown algorithm 5",
       [](Comm& c) {
         std::vector<float> d(6, 1.0f);
         reduce(c, std::span<float>(d), ReduceOp::kSum, 0, static_cast<ReduceAlgo>(5));
       }},
      {"allgather: unknown algorithm 2",
       [](Comm& c) {
         std::vector<float> in(2), out(6);
         allgather(c, std::span<const float>(in), std::span<float>(out),
                   static_cast<AllgatherAlgo>(2));
       }},
      {"reduce_scatter: unknown algorithm -1",
       [](Comm& c) {
         std::vector<float> d(6, 1.0f), out(2);
         reduce_scatter(c, std::span<float>(d), std::span<float>(out), ReduceOp::kSum,
                        static_cast<ReduceScatterAlgo>(-1));
       }},
      {"alltoall: unknown algorithm 3",
       [](Comm& c) {
         std::vector<float> in(6), out(6);
         alltoall(c, std::span<const float>(in), std::span<float>(out),
                  static_cast<AlltoallAlgo>(3));
       }},
      {"barrier: unknown algorithm 1", [](Comm& c) { barrier(c, static_cast<BarrierAlgo>(1)); }},
      {"broadcast: unknown algorithm 3",
       [](Comm& c) {
         std::vector<float> d(6, 1.0f);
         broadcast(c, std::span<float>(d), 0, static_cast<BroadcastAlgo>(3));
       }},
      {"allgather_in_place: unknown algorithm 2",
       [](Comm& c) {
         std::vector<float> d(6, 1.0f);
         allgather_in_place(c, std::span<float>(d), static_cast<AllgatherAlgo>(2));
       }},
      {"allreduce: unknown algorithm 11",
       [](Comm& c) {
         std::vector<float> d(6, 1.0f);
         allreduce(c, std::span<float>(d), ReduceOp::kSum, static_cast<AllreduceAlgo>(11));
       }},
  };
  for (const auto& [expected, call] : cases) {
    try {
      dtw::testing::launch_bounded(3, [&, &call = call](Comm& comm) { call(comm); });
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), expected) && contains(e.what(), "rank ")) << e.what();
    }
  }
  EXPECT_EQ(name_of(static_cast<ReduceAlgo>(9)), "?");
  EXPECT_EQ(name_of(static_cast<AllgatherAlgo>(9)), "?");
  EXPECT_EQ(name_of(static_cast<ReduceScatterAlgo>(9)), "?");
  EXPECT_EQ(name_of(static_cast<AllreduceAlgo>(9)), "?");
  EXPECT_EQ(name_of(static_cast<BroadcastAlgo>(9)), "?");
}

TEST(CollectiveArgumentsTest, UnknownAlgorithmNameListsTheValidOnes) {
  try {
    parse_allreduce_algo("butterfly");
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "butterfly") && contains(e.what(), "ring")) << e.what();
  }
  for (auto algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                    AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect})
    EXPECT_EQ(parse_allreduce_algo(name_of(algo)), algo);
}

// The sweeps' Checker reports a float mismatch in the fewest digits that read
// back exactly, so two values that differ never print alike (a learner once
// read "expected -1.479, got -1.479" in step 01.10).
TEST(CollectiveArgumentsTest, FloatsThatDifferPrintDifferently) {
  const float expected = -1.479f;
  const float got = std::nextafter(expected, 0.0f);
  const std::string message = dtw::testing::compare(2, std::vector<float>{expected},
                                                     std::vector<float>{got});
  EXPECT_TRUE(contains(message, "expected -1.479, got -1.4789999")) << message;
  const double wide = -1.479;
  const std::string wide_message = dtw::testing::compare(
      0, std::vector<double>{wide}, std::vector<double>{std::nextafter(wide, 0.0)});
  EXPECT_TRUE(contains(wide_message, "expected -1.479, got -1.4789999999999999")) << wide_message;
}

}  // namespace
}  // namespace dtw::ch01
