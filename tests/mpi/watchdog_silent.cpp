// Hangs on purpose, with one silent rank: rank 0 receives from rank 1, and
// rank 1 makes no dtw call at all for far longer than the timeout (as a rank
// stuck in its own code would). Rank 0's watchdog must name what it waits
// for and abort the job; rank 1's must say that it has made no call, so the
// report names the silent rank instead of leaving it to be guessed.
// Run by the mpi.watchdog_silent CTest entry through expect_abort.cmake.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "dtw/dtw.h"
#include "dtw/mpi.h"

int main() {
  dtw::LaunchOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(1);
  dtw::launch(0, options, [](dtw::Comm& comm) {
    std::vector<float> x(16);
    if (comm.rank() == 1) {
      // Silent: no call of dtw until the job is aborted (at most a minute).
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (comm.rank() == 0) comm.recv(x, 1, 7);
  });
  std::puts("not reached: the watchdog should have aborted the job");
  return 0;
}
