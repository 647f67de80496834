// Steps 01.1 and 01.8 (the collectives' own context): a collective never takes a message
// the caller's point-to-point meant for itself, whatever its tag. Before
// collectives had a context of their own, chapter 01 used tags kMaxTag-1 ...
// kMaxTag-9, and a user isend with tag kMaxTag-1 pending across a broadcast
// swapped the two payloads silently, even with the fingerprint check on.
#include <string>
#include <vector>

#include "sweep.h"

namespace dtw::ch01 {
namespace {

// Every broadcast algorithm: the scatter + allgather one runs step 01.4's ring.
DTW_TEST_STEPS(CollectiveContextTest, "01.1", "01.4", "01.6");
// The default allreduce, the ring.
DTW_TEST_STEPS(AllreduceContextTest, "01.4", "01.5", "01.8");

TEST(CollectiveContextTest, PendingUserIsendWithTheOldBroadcastTagDoesNotCross) {
  for (const BroadcastAlgo algo :
       {BroadcastAlgo::kLinear, BroadcastAlgo::kBinomial, BroadcastAlgo::kScatterAllgather}) {
    DTW_TRACE("broadcast " << name_of(algo) << " with a pending user isend on tag kMaxTag-1");
    sweep::on_every_world(
        [algo](Comm& comm) {
          comm.set_verify_collectives(true);
          const int r = comm.rank(), p = comm.size();
          // Rank 0 leaves a user message to every other rank pending on the
          // very tag the broadcast used to take, then all broadcast from 0.
          const std::vector<double> user{-1.0 - r, -2.0 - r, -3.0 - r};
          std::vector<Request> sends;
          if (r == 0)
            for (int q = 1; q < p; ++q) sends.push_back(comm.isend(user, q, kMaxTag - 1));
          std::vector<double> data = r == 0 ? std::vector<double>{10.5, 11.5, 12.5}
                                            : std::vector<double>(3, 0.0);
          broadcast(comm, std::span<double>(data), 0, algo);
          EXPECT_EQ(data, (std::vector<double>{10.5, 11.5, 12.5})) << "rank " << r;
          if (r != 0) {
            std::vector<double> got(3);
            comm.recv(got, 0, kMaxTag - 1);
            EXPECT_EQ(got, (std::vector<double>{-1.0, -2.0, -3.0})) << "rank " << r;
          }
          comm.wait_all(sends);
        },
        {2, 3, 4, 5});
  }
}

TEST(AllreduceContextTest, UserMessagesOnEveryOldCollectiveTagSurviveAnAllreduce) {
  sweep::on_every_world(
      [](Comm& comm) {
        const int r = comm.rank(), p = comm.size();
        const int right = (r + 1) % p, left = (r + p - 1) % p;
        // A user message to the right neighbour on each tag chapter 01 once used.
        std::vector<std::vector<std::int64_t>> in(9, std::vector<std::int64_t>(1));
        std::vector<std::int64_t> out(9);
        std::vector<Request> reqs;
        for (int k = 1; k <= 9; ++k) {
          out[static_cast<std::size_t>(k - 1)] = 100 * r + k;
          reqs.push_back(comm.isend(std::span<const std::int64_t>(&out[static_cast<std::size_t>(k - 1)], 1),
                                    right, kMaxTag - k));
        }
        std::vector<std::int64_t> data(7, r + 1);
        allreduce(comm, std::span<std::int64_t>(data), ReduceOp::kSum);
        EXPECT_EQ(data, std::vector<std::int64_t>(7, p * (p + 1) / 2)) << "rank " << r;
        for (int k = 1; k <= 9; ++k)
          reqs.push_back(comm.irecv(in[static_cast<std::size_t>(k - 1)], left, kMaxTag - k));
        comm.wait_all(reqs);
        for (int k = 1; k <= 9; ++k)
          EXPECT_EQ(in[static_cast<std::size_t>(k - 1)][0], 100 * left + k) << "rank " << r;
      },
      {1, 2, 3, 4});
}

}  // namespace
}  // namespace dtw::ch01
