// Measures chapter 01's ring and Rabenseifner allreduce over the mpi backend's
// point-to-point against MPI_Allreduce (the backend's reference_allreduce) in
// the same run, at 1 MiB and 64 MiB of floats, and prints busbw and the ratio.
//   mpirun -np 4 build/dtw_mpi_allreduce_ratio [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "collectives.h"
#include "dtw/dtw.h"
#include "dtw/mpi.h"

namespace {

// Seconds per call: the slowest rank's mean over `iterations` calls.
double time_it(dtw::Comm& comm, int iterations, const std::function<void()>& call) {
  call();  // warm-up
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) call();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
  comm.reference_allreduce({&s, 1, dtw::DataType::kFloat64}, dtw::ReduceOp::kMax);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 10;
  dtw::LaunchOptions options;
  options.backend = "mpi";
  options.timeout = std::chrono::seconds(120);
  dtw::launch(0, options, [&](dtw::Comm& comm) {
    const int p = comm.size();
    if (comm.rank() == 0)
      std::printf("%d ranks over MPI; busbw = bytes/time * 2(p-1)/p\n%-10s %-14s %10s %12s %8s\n", p,
                  "size", "algorithm", "time(us)", "busbw(GB/s)", "vs MPI");
    for (const std::size_t bytes : {std::size_t{1} << 20, std::size_t{64} << 20}) {
      std::vector<float> data(bytes / sizeof(float), 1.0f);
      const int iters = bytes > (std::size_t{8} << 20) ? std::max(2, iterations / 4) : iterations;
      const double mpi = time_it(comm, iters, [&] {
        comm.reference_allreduce(dtw::as_buffer(std::span(data)), dtw::ReduceOp::kSum);
      });
      struct Row {
        const char* name;
        double seconds;
      };
      std::vector<Row> rows{{"MPI_Allreduce", mpi}};
      for (auto [name, algo] : {std::pair{"ring", dtw::ch01::AllreduceAlgo::kRing},
                                std::pair{"rabenseifner", dtw::ch01::AllreduceAlgo::kRabenseifner}}) {
        rows.push_back({name, time_it(comm, iters, [&] {
                          dtw::ch01::allreduce(comm, std::span(data), dtw::ReduceOp::kSum, algo);
                        })});
      }
      if (comm.rank() != 0) continue;
      for (const Row& r : rows) {
        const double busbw = static_cast<double>(bytes) / r.seconds * 2.0 * (p - 1) / p / 1e9;
        std::printf("%-10s %-14s %10.1f %12.2f %8.2f\n", bytes == (1u << 20) ? "1 MiB" : "64 MiB",
                    r.name, r.seconds * 1e6, busbw, mpi / r.seconds);
      }
    }
  });
  return 0;
}
