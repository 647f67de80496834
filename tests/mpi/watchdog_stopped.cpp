// A rank stopped with SIGSTOP, on purpose. Its watchdog thread is stopped
// with it, so it can say nothing; the others must name it.
//   watchdog_stopped stopped   (3 ranks) rank 1 stops itself; ranks 0 and 2
//                              receive from it. The job's one report must say
//                              that rank 1 answered nothing and that ranks 0
//                              and 2 wait for it, then abort the job.
//   watchdog_stopped resumed   (2 ranks) rank 1 is stopped for 3 s while it
//                              waits for rank 0, which sends after 4 s; the
//                              timeout is 2 s. Rank 1 waited 4 s by the clock
//                              but ran for 1 s of them: it must not call the
//                              time it was stopped blocking, and the job
//                              must finish (exit 0, "finished").
// Run by the mpi.watchdog_stopped* CTest entries through expect_abort.cmake.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

#include "dtw/dtw.h"
#include "dtw/mpi.h"

namespace {

void nap(double s) {  // async-signal-safe, for the forked child
  timespec t{static_cast<time_t>(s), static_cast<long>((s - static_cast<time_t>(s)) * 1e9)};
  while (nanosleep(&t, &t) != 0) {
  }
}

// A child that stops this process after `after` seconds and lets it run again
// `stopped` seconds later. Between fork and _exit it calls only
// async-signal-safe functions, as a child of a threaded process must.
pid_t stop_me(double after, double stopped) {
  const pid_t me = getpid();
  const pid_t child = fork();
  if (child == 0) {
    for (int fd = 0; fd < 3; ++fd) close(fd);  // mpirun need not wait for it
    nap(after);
    kill(me, SIGSTOP);
    nap(stopped);
    kill(me, SIGCONT);
    _exit(0);
  }
  return child;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "stopped";
  dtw::LaunchOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(mode == "stopped" ? 1 : 2);
  dtw::launch(0, options, [&](dtw::Comm& comm) {
    std::vector<float> x(16);
    comm.reference_allreduce(dtw::as_buffer(std::span(x)), dtw::ReduceOp::kSum);
    if (mode == "stopped") {
      // Let it run again after 30 s, should the abort not reach it.
      if (comm.rank() == 1) stop_me(0, 30);
      if (comm.rank() != 1) comm.recv(x, 1, 7);
      if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(1));  // stopped in it
      return;
    }
    if (comm.rank() == 1) {
      const pid_t child = stop_me(0.2, 3.0);
      comm.recv(x, 0, 7);
      waitpid(child, nullptr, 0);
    } else if (comm.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::seconds(4));  // no dtw call
      comm.send(x, 1, 7);
    }
  });
  if (mode == "stopped") {
    std::puts("not reached: the watchdog should have aborted the job");
    return 0;
  }
  if (dtw::mpi::world_rank() == 0) std::puts("finished");
  return 0;
}
