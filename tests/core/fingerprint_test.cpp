// The collective fingerprint check (Comm::verify_collective): ranks that agree
// pass, ranks that disagree all raise the same CollectiveMismatch naming who
// called what, and the check costs nothing when it is off.
//
// Each rank catches its own error here, so that no rank fails the launch
// while another is still in the exchange: that shows every rank raised it.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;
using Call = Comm::CollectiveCall;

Call allreduce_call(std::int64_t count) {
  return {.name = "allreduce",
          .count = count,
          .type = DataType::kFloat32,
          .op = static_cast<int>(ReduceOp::kSum),
          .root = -1};
}
Call broadcast_call(std::int64_t count, int root) {
  return {.name = "broadcast", .count = count, .type = DataType::kFloat32, .op = -1, .root = root};
}

// Runs `call_of(rank)` through verify_collective on every rank with the check
// on and returns each rank's CollectiveMismatch message ("" when none).
template <class F>
std::vector<std::string> mismatch_messages(int p, F call_of) {
  std::vector<std::string> messages(static_cast<std::size_t>(p));
  launch_bounded(p, [&](Comm& comm) {
    comm.set_verify_collectives(true);
    try {
      comm.verify_collective(call_of(comm.rank()));
    } catch (const CollectiveMismatch& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.message();
    }
  });
  return messages;
}

TEST(FingerprintTest, MatchingCallsPass) {
  for (int p : {1, 2, 3, 7, 16}) {
    const auto messages = mismatch_messages(p, [](int) { return allreduce_call(1024); });
    for (int r = 0; r < p; ++r) EXPECT_EQ(messages[r], "") << "p " << p << ", rank " << r;
  }
}

TEST(FingerprintTest, DifferentCollectivesNameBothCalls) {
  const auto messages = mismatch_messages(
      4, [](int r) { return r == 2 ? broadcast_call(1024, 0) : allreduce_call(1024); });
  const std::string want =
      "collective mismatch: ranks 0, 1, 3 called allreduce(count 1024, float32, sum) but rank 2 "
      "called broadcast(count 1024, float32, root 0)";
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(messages[r].rfind(want, 0), 0u) << "rank " << r << ": " << messages[r];
  }
}

TEST(FingerprintTest, EveryRankRaisesTheSameMessage) {
  for (int p : {2, 3, 5, 8}) {
    const auto messages =
        mismatch_messages(p, [p](int r) { return allreduce_call(r == p - 1 ? 100 : 99); });
    ASSERT_NE(messages[0], "") << "p " << p;
    for (int r = 1; r < p; ++r) EXPECT_EQ(messages[r], messages[0]) << "p " << p << ", rank " << r;
    EXPECT_NE(messages[0].find("rank " + std::to_string(p - 1) + " called allreduce(count 100"),
              std::string::npos)
        << messages[0];
  }
}

TEST(FingerprintTest, EachFieldIsCompared) {
  // Rank 1 differs from rank 0 in exactly one field per case.
  const std::vector<std::pair<Call, std::string>> cases = {
      {{.name = "allreduce", .count = 8, .type = DataType::kFloat64, .op = 0}, "float64"},
      {{.name = "allreduce", .count = 8, .type = DataType::kFloat32, .op = 2}, "min"},
      {{.name = "allreduce", .count = 7, .type = DataType::kFloat32, .op = 0}, "count 7"},
      {{.name = "reduce", .count = 8, .type = DataType::kFloat32, .op = 0}, "reduce(count 8"},
      {{.name = "allreduce", .count = 8, .type = DataType::kFloat32, .op = 0, .root = 1}, "root 1"},
  };
  for (const auto& [odd, text] : cases) {
    const auto messages =
        mismatch_messages(2, [&](int r) { return r == 1 ? odd : allreduce_call(8); });
    EXPECT_NE(messages[0].find("rank 1 called"), std::string::npos) << text << ": " << messages[0];
    EXPECT_NE(messages[0].find(text), std::string::npos) << text << ": " << messages[0];
  }
}

TEST(FingerprintTest, ThreeDifferentCallsAreAllListed) {
  const auto messages = mismatch_messages(7, [](int r) {
    if (r == 5) return broadcast_call(16, 3);
    if (r == 6) return allreduce_call(17);
    return allreduce_call(16);
  });
  EXPECT_EQ(messages[0].rfind("collective mismatch: ranks 0-4 called allreduce(count 16, float32, "
                              "sum) but rank 5 called broadcast(count 16, float32, root 3) and "
                              "rank 6 called allreduce(count 17, float32, sum)",
                              0),
            0u)
      << messages[0];
}

TEST(FingerprintTest, OffMeansNoExchangeAndNoError) {
  const Report report = launch_bounded(4, [](Comm& comm) {
    comm.set_verify_collectives(false);
    // Disagreeing calls pass unnoticed, and no rank waits for another: rank 3
    // does not even call.
    if (comm.rank() != 3) comm.verify_collective(allreduce_call(comm.rank()));
  });
  EXPECT_TRUE(report.ok());
}

TEST(FingerprintTest, UncaughtMismatchFailsTheLaunchWithIt) {
  try {
    launch_bounded(3, [](Comm& comm) {
      comm.set_verify_collectives(true);
      comm.verify_collective(comm.rank() == 0 ? broadcast_call(4, 2) : allreduce_call(4));
    });
    ADD_FAILURE() << "no error";
  } catch (const CollectiveMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 called broadcast(count 4, float32, root 2) but "
                                         "ranks 1, 2 called allreduce(count 4, float32, sum)"),
              std::string::npos)
        << e.what();
  }
}

TEST(FingerprintTest, WorksInsideASplitGroup) {
  // Two groups of three; only the odd group disagrees, and names group ranks.
  std::mutex mu;
  std::vector<std::string> odd_messages, even_messages;
  launch_bounded(6, [&](Comm& comm) {
    auto group = comm.split(comm.rank() % 2, comm.rank());
    group->set_verify_collectives(true);
    const bool odd = comm.rank() % 2 == 1;
    const Call call = odd && group->rank() == 2 ? allreduce_call(5) : allreduce_call(4);
    std::string message;
    try {
      group->verify_collective(call);
    } catch (const CollectiveMismatch& e) {
      message = e.message();
    }
    const std::lock_guard lock(mu);
    (odd ? odd_messages : even_messages).push_back(message);
  });
  for (const std::string& m : even_messages) EXPECT_EQ(m, "");
  ASSERT_EQ(odd_messages.size(), 3u);
  for (const std::string& m : odd_messages)
    EXPECT_NE(m.find("ranks 0, 1 called allreduce(count 4"), std::string::npos) << m;
}

TEST(FingerprintTest, SetterOverridesTheDefault) {
  // Whatever the build type, set_verify_collectives overrides the default.
  launch_bounded(2, [](Comm& comm) {
    comm.set_verify_collectives(true);
    EXPECT_TRUE(comm.verify_collectives());
    comm.set_verify_collectives(false);
    EXPECT_FALSE(comm.verify_collectives());
  });
}

}  // namespace
}  // namespace dtw
