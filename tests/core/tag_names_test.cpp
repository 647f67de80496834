// Tag names in reports: a tag named with DTW_NAME_TAG shows its name beside the
// number, an unnamed one shows the number only, and a message on a collective
// channel is reported as the collective operation its tag numbers.
#include <string>
#include <vector>

#include "dtw_test.h"

namespace dtw {
namespace {

constexpr int kNamedTestTag = 777;
DTW_NAME_TAG(kNamedTestTag);

// The DeadlockError of two ranks that both send first on `tag`.
std::string send_send_deadlock(int tag) {
  try {
    testing::launch_bounded(2, [tag](Comm& comm) {
      std::vector<float> out(4), in(4);
      comm.send(out, 1 - comm.rank(), tag);
      comm.recv(in, 1 - comm.rank(), tag);
    });
  } catch (const DeadlockError& e) {
    return e.what();
  }
  return "no deadlock";
}

TEST(TagNamesTest, NamedTagShowsItsName) {
  EXPECT_EQ(tag_name(kNamedTestTag), "kNamedTestTag");
  const std::string report = send_send_deadlock(kNamedTestTag);
  EXPECT_NE(report.find("tag 777 (kNamedTestTag)"), std::string::npos) << report;
}

TEST(TagNamesTest, UnnamedTagShowsTheNumber) {
  EXPECT_EQ(tag_name(778), "");
  const std::string report = send_send_deadlock(778);
  EXPECT_NE(report.find("tag 778,"), std::string::npos) << report;
}

TEST(TagNamesTest, AValueNamedTwiceShowsBothNames) {
  name_tag(779, "kFirst");
  name_tag(779, "kSecond");
  name_tag(779, "kFirst");
  EXPECT_EQ(tag_name(779), "kFirst or kSecond");
}

TEST(TagNamesTest, CollectiveChannelMessagesAreOperationsNotTags) {
  try {
    testing::launch_bounded(2, [](Comm& comm) {
      Comm& channel = comm.collective_channel();
      EXPECT_TRUE(channel.is_collective_channel());
      EXPECT_FALSE(comm.is_collective_channel());
      std::vector<float> data(4);
      // Rank 0 waits on operation 777 of the channel; rank 1 never sends.
      if (comm.rank() == 0) channel.recv(data, 1, kNamedTestTag);
    });
    ADD_FAILURE() << "no deadlock";
  } catch (const DeadlockError& e) {
    const std::string report = e.what();
    EXPECT_NE(report.find("collective operation 777"), std::string::npos) << report;
    EXPECT_EQ(report.find("kNamedTestTag"), std::string::npos) << report;
  }
}

}  // namespace
}  // namespace dtw
