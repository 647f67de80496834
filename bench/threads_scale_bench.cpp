// Google Benchmark for the threads backend at scale: whole launches of
// thousands of rank threads. BM_ThreadsScale_TokenRing/<p>: a token once
// around the ring (p - 1 hops, each waits for the last); and
// BM_ThreadsScale_RingAllreduce1MiB/<p>: chapter 01's ring allreduce of 1 MiB
// of float per rank (2(p - 1) steps of 1/p of it). The time of an iteration is
// the whole launch: starting p threads, the work, joining them, as a user
// waits for `dtw run`. Results and the command: docs/results/threads_at_scale.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/dtw.h"
#if DTW_BENCH_HAVE_CH01
#include "collectives.h"
#endif

namespace {

void BM_ThreadsScale_TokenRing(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  for (auto _ : state) {
    dtw::launch(p, [p](dtw::Comm& comm) {
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
    ->Arg(512)->Arg(1024)->Arg(2048)->Arg(4096)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

#if DTW_BENCH_HAVE_CH01
void BM_ThreadsScale_RingAllreduce1MiB(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  constexpr std::size_t kCount = (std::size_t{1} << 20) / sizeof(float);
  for (auto _ : state) {
    dtw::launch(p, [](dtw::Comm& comm) {
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
BENCHMARK(BM_ThreadsScale_RingAllreduce1MiB)
    ->Arg(256)->Arg(1024)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
#endif

}  // namespace

BENCHMARK_MAIN();
