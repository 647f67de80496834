// Bad input gets an InvalidArgument that names the rank and the values, never a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using testing::launch_bounded;

// Runs `fn` on `world` ranks and returns the what() of the InvalidArgument
// that launch rethrows (empty when none).
std::string invalid_argument_of(int world, const RankFunction& fn) {
  try {
    launch_bounded(world, fn, std::chrono::seconds(5));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(ErrorsTest, PeerOutOfRangeNamesRankAndPeer) {
  for (int bad : {-1, 3, 100}) {
    const std::string what = invalid_argument_of(3, [&](Comm& comm) {
      if (comm.rank() == 2) comm.send(std::vector<float>(2), bad, 0);
    });
    EXPECT_THAT(what, HasSubstr("rank 2"));
    EXPECT_THAT(what, HasSubstr("send with peer " + std::to_string(bad)));
    EXPECT_THAT(what, HasSubstr("[0, 3)"));
  }
}

TEST(ErrorsTest, EveryCallChecksItsPeer) {
  const std::string irecv = invalid_argument_of(2, [](Comm& comm) {
    std::vector<std::int32_t> in(1);
    if (comm.rank() == 1) Request r = comm.irecv(in, 2, 0);
  });
  EXPECT_THAT(irecv, HasSubstr("rank 1: irecv with peer 2"));
  const std::string recv_reduce = invalid_argument_of(2, [](Comm& comm) {
    std::vector<double> in(1);
    if (comm.rank() == 0) comm.recv_reduce(in, -5, ReduceOp::kSum);
  });
  EXPECT_THAT(recv_reduce, HasSubstr("rank 0: recv_reduce with peer -5"));
}

TEST(ErrorsTest, NegativeCountIsRejected) {
  const std::string what = invalid_argument_of(2, [](Comm& comm) {
    float x = 0;
    if (comm.rank() == 1) comm.send_buffer(ConstBuffer{&x, -4, DataType::kFloat32}, 0, 0);
  });
  EXPECT_THAT(what, HasSubstr("rank 1"));
  EXPECT_THAT(what, HasSubstr("count -4"));
  EXPECT_THAT(what, HasSubstr("negative"));
}

TEST(ErrorsTest, TagOutOfRangeIsRejected) {
  for (int bad : {-1, kMaxTag + 1}) {
    const std::string what = invalid_argument_of(2, [&](Comm& comm) {
      std::vector<float> in(1);
      if (comm.rank() == 0) comm.recv(in, 1, bad);
    });
    EXPECT_THAT(what, HasSubstr("rank 0"));
    EXPECT_THAT(what, HasSubstr("tag " + std::to_string(bad)));
    EXPECT_THAT(what, HasSubstr(std::to_string(kMaxTag)));
  }
}

TEST(ErrorsTest, ReceiveBufferSmallerThanMessage) {
  const std::string what = invalid_argument_of(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      comm.send(std::vector<std::int32_t>(10), 1, 6);
    } else {
      std::vector<std::int32_t> in(4);
      comm.recv(in, 0, 6);
    }
  });
  EXPECT_THAT(what, HasSubstr("larger than the receive buffer"));
  EXPECT_THAT(what, HasSubstr("rank 0 sends 10 int32"));
  EXPECT_THAT(what, HasSubstr("rank 1 receives into 4 int32"));
  EXPECT_THAT(what, HasSubstr("tag 6"));
}

TEST(ErrorsTest, TypeMismatchNamesBothTypes) {
  const std::string what = invalid_argument_of(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      comm.send(std::vector<float>(3), 1, 0);
    } else {
      std::vector<std::int32_t> in(3);
      comm.recv(in, 0, 0);
    }
  });
  EXPECT_THAT(what, HasSubstr("type mismatch"));
  EXPECT_THAT(what, HasSubstr("rank 0 sends 3 float32"));
  EXPECT_THAT(what, HasSubstr("rank 1 receives into 3 int32"));
}

TEST(ErrorsTest, BothSidesOfABadMatchFail) {
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    if (comm.rank() == 0) {
      comm.send(std::vector<double>(2), 1, 0);
    } else {
      std::vector<float> in(2);
      comm.recv(in, 0, 0);
    }
  });
  ASSERT_EQ(report.errors.size(), 2u);
  for (const RankError& e : report.errors) {
    EXPECT_EQ(e.kind, "InvalidArgument");
    EXPECT_THAT(e.message, HasSubstr("type mismatch"));
  }
}

TEST(ErrorsTest, RecvReduceNeedsExactSize) {
  const std::string what = invalid_argument_of(2, [](Comm& comm) {
    if (comm.rank() == 0) {
      comm.send(std::vector<float>(3), 1, 0);
    } else {
      std::vector<float> acc(5);
      comm.recv_reduce(acc, 0, ReduceOp::kMax, 0);
    }
  });
  EXPECT_THAT(what, HasSubstr("exactly"));
  EXPECT_THAT(what, HasSubstr("3 float32"));
  EXPECT_THAT(what, HasSubstr("5 float32"));
}

TEST(ErrorsTest, RecvReduceRejectsBytes) {
  const std::string what = invalid_argument_of(1, [](Comm& comm) {
    std::vector<std::byte> acc(5);
    comm.recv_reduce(acc, 0, ReduceOp::kSum, 0);
  });
  EXPECT_THAT(what, HasSubstr("rank 0"));
  EXPECT_THAT(what, HasSubstr("raw bytes"));
}

TEST(ErrorsTest, SplitWithInvalidColor) {
  const std::string what = invalid_argument_of(3, [](Comm& comm) {
    auto sub = comm.split(comm.rank() == 1 ? -7 : 0, 0);
  });
  EXPECT_THAT(what, HasSubstr("rank 1"));
  EXPECT_THAT(what, HasSubstr("color -7"));
}

TEST(ErrorsTest, LaunchRejectsBadWorldAndBackend) {
  EXPECT_THROW(launch(0, [](Comm&) {}), InvalidArgument);
  LaunchOptions options;
  options.backend = "carrier-pigeon";
  try {
    launch(2, options, [](Comm&) {});
    ADD_FAILURE() << "unknown backend accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("carrier-pigeon"));
  }
  options = {};
  options.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(launch_collecting(2, options, [](Comm&) {}), InvalidArgument);
}

// launch and launch_collecting share one validation: a negative or zero
// timeout, one past kMaxLaunchTimeout and a negative memory cap are refused by
// both, on every backend, before any rank runs.
TEST(ErrorsTest, LaunchValidatesEveryOption) {
  for (const auto& [what, options] : std::vector<std::pair<std::string, LaunchOptions>>{
           {"timeout -5 ms", {.timeout = std::chrono::milliseconds(-5)}},
           {"timeout 0 ms", {.timeout = std::chrono::milliseconds(0)}},
           {"timeout", {.timeout = kMaxLaunchTimeout + std::chrono::milliseconds(1)}},
           {"memory cap -1", {.memory_cap = -1}}}) {
    bool ran = false;
    for (bool collecting : {false, true}) {
      try {
        if (collecting) launch_collecting(2, options, [&](Comm&) { ran = true; });
        else launch(2, options, [&](Comm&) { ran = true; });
        ADD_FAILURE() << what << " accepted by " << (collecting ? "launch_collecting" : "launch");
      } catch (const InvalidArgument& e) {
        EXPECT_THAT(std::string(e.what()), HasSubstr(what));
      }
    }
    EXPECT_FALSE(ran) << what;
  }
}

// An enum cast from an integer outside its range is refused where it enters,
// naming the rank and the value, instead of reducing garbage.
TEST(ErrorsTest, ReduceOpOutOfRangeIsRejected) {
  const auto bad = static_cast<ReduceOp>(9);
  const std::string recv_reduce = invalid_argument_of(2, [&](Comm& comm) {
    std::vector<float> acc(3, 1.0f);
    if (comm.rank() == 1) comm.recv_reduce(acc, 0, bad);
  });
  EXPECT_THAT(recv_reduce, HasSubstr("rank 1: recv_reduce with op 9"));
  EXPECT_THAT(recv_reduce, HasSubstr("not a ReduceOp"));
  const std::string reference = invalid_argument_of(3, [&](Comm& comm) {
    std::vector<double> data(4, 1.0);
    comm.reference_allreduce(as_buffer(std::span<double>(data)), bad);
  });
  EXPECT_THAT(reference, HasSubstr("op 9"));
  EXPECT_THAT(reference, HasSubstr("not a ReduceOp"));
  const std::string scatter = invalid_argument_of(2, [&](Comm& comm) {
    std::vector<std::int32_t> in(4, 1), out(2);
    comm.reference_reduce_scatter(as_buffer(std::span<const std::int32_t>(in)),
                                  as_buffer(std::span<std::int32_t>(out)), bad);
  });
  EXPECT_THAT(scatter, HasSubstr("op 9"));
}

TEST(ErrorsTest, DataTypeOutOfRangeIsRejected) {
  const std::string what = invalid_argument_of(2, [](Comm& comm) {
    float x[2] = {};
    const auto bad = static_cast<DataType>(12);
    if (comm.rank() == 0) comm.send_buffer(ConstBuffer{x, 2, bad}, 1, 0);
    if (comm.rank() == 1) comm.recv_buffer(Buffer{x, 2, bad}, 0, 0);
  });
  EXPECT_THAT(what, HasSubstr("element type 12"));
  EXPECT_THAT(what, HasSubstr("not a DataType"));
}

TEST(ErrorsTest, ErrorCarriesLocationAndRank) {
  try {
    launch_bounded(2, [](Comm& comm) {
      if (comm.rank() == 1) DTW_CHECK_ARG(false, "bad value " << 42);
    });
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_EQ(e.message(), "bad value 42");
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 1: bad value 42 [tests/core/errors_test.cpp:"));
  }
}

}  // namespace
}  // namespace dtw
