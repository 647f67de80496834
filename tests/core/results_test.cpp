// gather_results and allgather_results: every rank's value collected on rank 0
// (or everywhere), for values of different sizes on different ranks. Run on
// the threads backend and, through the MPI twin, on processes, where a rank's
// value can reach another only through these calls.
#include <gmock/gmock.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dtw/results.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using testing::launch_bounded;

struct Sample {
  std::int32_t rank;
  double loss;
  bool operator==(const Sample&) const = default;
};

std::string text_of(int r) { return std::string(static_cast<std::size_t>(r) * 3, 'a' + r % 26); }
std::vector<float> floats_of(int r) {
  std::vector<float> v(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(r) + 0.25f * i;
  return v;
}

TEST(GatherResultsTest, RankZeroGetsEveryRanksValueInRankOrder) {
  for (const int p : {1, 2, 3, 5}) {
    SCOPED_TRACE("world " + std::to_string(p));
    launch_bounded(p, [](Comm& comm) {
      const int r = comm.rank();
      const auto samples = gather_results(comm, Sample{r, 0.5 * r});
      const auto texts = gather_results(comm, text_of(r));  // "" on rank 0
      const auto vectors = gather_results(comm, floats_of(r));
      const auto lists = gather_results(comm, std::vector<std::string>(static_cast<std::size_t>(r), text_of(r)));
      if (r != 0) {
        EXPECT_TRUE(samples.empty() && texts.empty() && vectors.empty() && lists.empty());
        return;
      }
      ASSERT_EQ(samples.size(), static_cast<std::size_t>(comm.size()));
      for (int q = 0; q < comm.size(); ++q) {
        const auto i = static_cast<std::size_t>(q);
        EXPECT_EQ(samples[i], (Sample{q, 0.5 * q}));
        EXPECT_EQ(texts[i], text_of(q));
        EXPECT_EQ(vectors[i], floats_of(q));
        EXPECT_EQ(lists[i], std::vector<std::string>(i, text_of(q)));
      }
    });
  }
}

TEST(GatherResultsTest, AllgatherGivesEveryRankEveryValue) {
  for (const int p : {1, 3, 4}) {
    launch_bounded(p, [](Comm& comm) {
      const auto all = allgather_results(comm, std::vector<std::int64_t>{comm.rank(), 7});
      ASSERT_EQ(all.size(), static_cast<std::size_t>(comm.size()));
      for (int q = 0; q < comm.size(); ++q)
        EXPECT_EQ(all[static_cast<std::size_t>(q)], (std::vector<std::int64_t>{q, 7}));
    });
  }
}

TEST(GatherResultsTest, WorksOnASplitGroup) {
  launch_bounded(4, [](Comm& comm) {
    const auto half = comm.split(comm.rank() % 2, comm.rank());
    const auto all = allgather_results(*half, comm.world_rank());
    EXPECT_EQ(all, (std::vector<int>{comm.rank() % 2, comm.rank() % 2 + 2}));
  });
}

TEST(GatherResultsTest, RanksPassingDifferentTypesGetInvalidArgument) {
  // Rank 1 sends 4 bytes where a string needs at least its 8-byte length.
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    if (comm.rank() == 0) {
      (void)allgather_results(comm, std::string("hello"));
    } else {
      (void)allgather_results(comm, std::int32_t{42});
    }
  });
  ASSERT_FALSE(report.errors.empty());
  bool named = false;
  for (const RankError& e : report.errors)
    named = named || (e.kind == "InvalidArgument" &&
                      e.message.find("do all ranks pass the same result type?") != std::string::npos);
  EXPECT_TRUE(named) << report.errors[0].message;
}

}  // namespace
}  // namespace dtw
