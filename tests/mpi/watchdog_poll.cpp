// Hangs on purpose, with ranks that poll instead of blocking. Each poll of
// Comm::test is a dtw call, so no rank is silent and none is blocked: before
// the watchdog counted polling, such a job ran until CI killed it. Now a rank
// that has polled for the launch timeout with none of its operations
// completing is treated as blocked: its watchdog names it, what it polls for
// (peer, tag, bytes), and aborts the job.
//   watchdog_poll test        both ranks poll a receive the other never sends
//   watchdog_poll collective  rank 0 polls an iallreduce (PendingCollective::
//                             test) that rank 1, silent, never joins
// Run by the mpi.watchdog_poll* CTest entries through expect_abort.cmake.
#include <chrono>
#include <cstdio>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "dtw/dtw.h"
#include "dtw/mpi.h"
#include "nonblocking.h"

namespace {

// No dtw call until the job is aborted (at most a minute), so this rank's own
// watchdog never aborts: the report that does must come from the poller.
void stay_silent() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "test";
  dtw::LaunchOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(1);
  dtw::launch(0, options, [&](dtw::Comm& comm) {
    std::vector<float> x(16);
    if (mode == "test") {
      // Rank 0 polls for tag 7 from rank 1, rank 1 for tag 9 from rank 0.
      const int peer = 1 - comm.rank();
      dtw::Request r = comm.irecv(x, peer, comm.rank() == 0 ? 7 : 9);
      while (!comm.test(r)) {
      }
      return;
    }
    // One allreduce together first: it also makes the collective channel,
    // whose creation is a collective call (rank 0 would block in it, not poll).
    dtw::ch01::iallreduce(comm, std::span<float>(x), dtw::ReduceOp::kSum).wait();
    if (comm.rank() == 1) return stay_silent();
    dtw::ch01::PendingCollective sum =
        dtw::ch01::iallreduce(comm, std::span<float>(x), dtw::ReduceOp::kSum);
    while (!sum.test()) {
    }
  });
  std::puts("not reached: the watchdog should have aborted the job");
  return 0;
}
