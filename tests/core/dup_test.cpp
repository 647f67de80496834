// Comm::dup and the collective channel: the same group in a new context, so
// messages never cross between communicators, whatever their tags.
#include <gmock/gmock.h>

#include <cstdint>
#include <vector>

#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using testing::launch_bounded;

TEST(DupTest, MessagesNeverCrossBetweenDuplicates) {
  for (const int p : {1, 2, 3, 5}) {
    launch_bounded(p, [](Comm& comm) {
      const std::unique_ptr<Comm> twin = comm.dup();
      ASSERT_EQ(twin->rank(), comm.rank());
      ASSERT_EQ(twin->size(), comm.size());
      EXPECT_EQ(twin->world_rank(), comm.world_rank());
      const int right = (comm.rank() + 1) % comm.size();
      const int left = (comm.rank() + comm.size() - 1) % comm.size();
      // Same peer, same tag on both: the twin's message is sent first, yet the
      // receive on `comm` (posted first) must get comm's message.
      std::vector<std::int64_t> on_comm(1), on_twin(1);
      const std::vector<std::int64_t> to_twin{1000 + comm.rank()}, to_comm{comm.rank()};
      Request a = comm.irecv(on_comm, left, 7);
      Request b = twin->irecv(on_twin, left, 7);
      Request s1 = twin->isend(to_twin, right, 7);
      Request s2 = comm.isend(to_comm, right, 7);
      comm.wait(a);
      twin->wait(b);
      twin->wait(s1);
      comm.wait(s2);
      EXPECT_EQ(on_comm[0], left);
      EXPECT_EQ(on_twin[0], 1000 + left);
      // A dup of a dup and of a split group work alike.
      const std::unique_ptr<Comm> again = twin->dup();
      again->barrier();
      const std::unique_ptr<Comm> half = comm.split(comm.rank() % 2, 0);
      const std::unique_ptr<Comm> half_twin = half->dup();
      EXPECT_EQ(half_twin->size(), half->size());
      half_twin->barrier();
    });
  }
}

TEST(DupTest, CollectiveChannelIsPrivateAndTagsCountOperations) {
  launch_bounded(3, [](Comm& comm) {
    Comm& channel = comm.collective_channel();
    EXPECT_NE(&channel, &comm);
    EXPECT_EQ(&comm.collective_channel(), &channel);
    EXPECT_EQ(&channel.collective_channel(), &channel);
    EXPECT_EQ(channel.rank(), comm.rank());
    EXPECT_EQ(comm.next_collective_tag(), 0);
    EXPECT_EQ(comm.next_collective_tag(), 1);
    EXPECT_EQ(channel.next_collective_tag(), 0);  // each communicator counts its own
    // A message on the channel never meets a receive on comm with the same tag.
    const int right = (comm.rank() + 1) % 3, left = (comm.rank() + 2) % 3;
    std::vector<std::int32_t> user(1), coll(1);
    Request u = comm.irecv(user, left, kMaxTag);
    channel.sendrecv(std::vector<std::int32_t>{-comm.rank()}, right, coll, left, kMaxTag);
    comm.send(std::vector<std::int32_t>{comm.rank()}, right, kMaxTag);
    comm.wait(u);
    EXPECT_EQ(coll[0], -left);
    EXPECT_EQ(user[0], left);
  });
}

TEST(DupTest, DupWhileTheLaunchAbortsIsAbortedError) {
  const Report report = launch_collecting(2, {}, [](Comm& comm) {
    if (comm.rank() == 1) DTW_CHECK_ARG(false, "rank 1 fails on purpose");
    std::vector<std::int32_t> x(1);
    EXPECT_THROW(comm.recv(x, 1), AbortedError);  // rank 1 never sends: it failed
    try {
      (void)comm.dup();
      ADD_FAILURE() << "dup succeeded while the launch was aborting";
    } catch (const AbortedError& e) {
      EXPECT_THAT(e.what(), HasSubstr("rank 1"));
    }
  });
  ASSERT_FALSE(report.errors.empty());
  EXPECT_EQ(report.errors[0].rank, 1);
  EXPECT_THAT(report.errors[0].message, HasSubstr("rank 1 fails on purpose"));
}

}  // namespace
}  // namespace dtw
