// Google Benchmark for the threads backend at scale: whole launches of
// thousands of ranks, as threads or as fibers (RankMode, the second argument:
// 1 threads, 2 fibers). BM_ThreadsScale_TokenRing/<p>/<mode>: a token once
// around the ring (p - 1 hops, each waits for the last); and
// BM_ThreadsScale_RingAllreduce1MiB/<p>/<mode>: chapter 01's ring allreduce of
// 1 MiB of float per rank (2(p - 1) steps of 1/p of it). The time of an
// iteration is the whole launch: starting the threads or fibers, the work,
// joining them, as a user waits for `dtw run`. DTW_FIBER_WORKERS sets the
// fibers' worker threads. Results and the command:
// docs/results/threads_at_scale.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/dtw.h"
#if DTW_BENCH_HAVE_CH01
#include "collectives.h"
#endif

namespace {

dtw::LaunchOptions in_mode(const benchmark::State& state) {
  dtw::LaunchOptions options;
  options.rank_mode = static_cast<dtw::RankMode>(state.range(1));
  return options;
}

void BM_ThreadsScale_TokenRing(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  for (auto _ : state) {
    dtw::launch(p, in_mode(state), [p](dtw::Comm& comm) {
      const int r = comm.rank();
      std::int64_t token = 0;
      if (r == 0) {
        token = 1;
        comm.send(std::span<const std::int64_t>(&token, 1), 1 % p);
        comm.recv(std::span<std::int64_t>(&token, 1), p - 1);
      } else {
        comm.recv(std::span<std::int64_t>(&token, 1), r - 1);
        ++token;
        comm.send(std::span<const std::int64_t>(&token, 1), (r + 1) % p);
      }
    });
  }
  state.counters["ranks"] = p;
}
BENCHMARK(BM_ThreadsScale_TokenRing)
    ->ArgsProduct({{512, 1024, 2048, 4096}, {1, 2}})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

#if DTW_BENCH_HAVE_CH01
void BM_ThreadsScale_RingAllreduce1MiB(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  constexpr std::size_t kCount = (std::size_t{1} << 20) / sizeof(float);
  for (auto _ : state) {
    dtw::launch(p, in_mode(state), [](dtw::Comm& comm) {
      std::vector<float> data(kCount, 1.0f);
      dtw::ch01::allreduce(comm, std::span<float>(data), dtw::ReduceOp::kSum,
                           dtw::ch01::AllreduceAlgo::kRing);
      if (data.front() != static_cast<float>(comm.size()))
        throw dtw::Error("ring allreduce gave a wrong sum");
    });
  }
  state.counters["ranks"] = p;
  state.SetBytesProcessed(state.iterations() * p * static_cast<std::int64_t>(kCount * sizeof(float)));
}
// Threads at 1024 ranks take some 17 s an iteration: only fibers go that far.
BENCHMARK(BM_ThreadsScale_RingAllreduce1MiB)
    ->Args({256, 1})->Args({256, 2})->Args({1024, 2})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
#endif

}  // namespace

BENCHMARK_MAIN();
