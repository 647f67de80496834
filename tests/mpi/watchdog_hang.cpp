// Hangs on purpose: every rank receives from its right neighbour and nobody
// sends. The watchdog must print each rank's pending receive and the last
// collectives it entered, then abort the job with a non-zero exit code.
// Run by the MpiWatchdog CTest entry through expect_abort.cmake.
#include <cstdio>
#include <vector>

#include "dtw/dtw.h"
#include "dtw/mpi.h"

int main() {
  dtw::LaunchOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(1);
  dtw::launch(0, options, [](dtw::Comm& comm) {
    std::vector<float> x(256);
    comm.reference_allreduce(dtw::as_buffer(std::span(x)), dtw::ReduceOp::kSum);
    // What a learner's collective announces first (chapter 01's dispatch): the
    // watchdog must list it even though the fingerprint check is off.
    comm.set_verify_collectives(false);
    comm.verify_collective({.name = "allgather:ring", .count = 256, .type = dtw::DataType::kFloat32});
    comm.recv(x, (comm.rank() + 1) % comm.size(), 7);
  });
  std::puts("not reached: the watchdog should have aborted the job");
  return 0;
}
