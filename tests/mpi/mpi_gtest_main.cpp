// GoogleTest main for test programs run under mpiexec. Every process runs every
// test; dtw launches inside the tests run on MPI (dtw::mpi::set_route_launches).
// Only rank 0 prints gtest's usual output. Each test's outcome is agreed on at
// its end: a failure on any rank fails the test on every rank, and the failing
// ranks are named (each prints its own failure messages, prefixed by its rank).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtw/mpi.h"

namespace {

class AgreeOnFailures : public ::testing::EmptyTestEventListener {
 public:
  explicit AgreeOnFailures(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    // Rank 0's printer shows its own failures; other ranks print theirs here.
    if (rank_ == 0 || !result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

  // Runs before the printer's OnTestEnd (end events go to listeners in reverse
  // order), so a failure added here still shows in rank 0's verdict.
  void OnTestEnd(const ::testing::TestInfo& info) override {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int failed = info.result()->Failed() ? 1 : 0;
    std::vector<int> all(static_cast<std::size_t>(size));
    MPI_Allgather(&failed, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::string ranks;
    for (int r = 0; r < size; ++r)
      if (all[static_cast<std::size_t>(r)] && r != rank_) ranks.append(" ").append(std::to_string(r));
    if (!ranks.empty()) ADD_FAILURE() << "this test failed on MPI rank(s)" << ranks;
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  dtw::mpi::init();
  dtw::mpi::set_route_launches(true);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = dtw::mpi::world_rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new AgreeOnFailures(rank));
  if (rank == 0) {
    std::printf("[ mpi ] %d processes; launches of up to %d ranks run on MPI, larger ones on "
                "threads in every process\n",
                dtw::mpi::world_size(), dtw::mpi::world_size());
  }
  // Tells sweeps how many processes the job has (tests/01-collectives/sweep.h):
  // a world larger than that runs on threads inside every process, which the
  // threads program tests already, so a sweep here leaves it out.
  setenv("DTW_MPI_TWIN_PROCESSES", std::to_string(dtw::mpi::world_size()).c_str(), 1);
  const int result = RUN_ALL_TESTS();
  // Ranks must not leave before the others finished their last collective.
  MPI_Barrier(MPI_COMM_WORLD);
  return result;
}
