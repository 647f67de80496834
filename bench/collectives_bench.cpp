// Google Benchmark for chapter 01's allreduce: BM_Allreduce/<algo>/<bytes>.
// The readable report with peers and the model is dtw_bench_collectives;
// this program is for comparing one change against another
// (--benchmark_out, tools/compare.py from Google Benchmark).
//
// Each benchmark run is one dtw::launch: the rank threads start once, then
// rank 0 drives Google Benchmark's iteration loop while the other ranks run
// the same number of calls. Times are manual (rank 0's wall time per call),
// so thread start-up never counts. Ranks: DTW_BENCH_RANKS (default 2).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtw/dtw.h"
#if DTW_BENCH_HAVE_CH01
#include "collectives.h"
#include "nonblocking.h"
#endif

namespace {

int bench_ranks() {
  const char* env = std::getenv("DTW_BENCH_RANKS");
  const int p = env ? std::atoi(env) : 2;
  return p >= 1 ? p : 2;
}

#if DTW_BENCH_HAVE_CH01
void BM_Allreduce(benchmark::State& state, dtw::ch01::AllreduceAlgo algo) {
  const int p = bench_ranks();
  const auto bytes = static_cast<std::int64_t>(state.range(0));
  const auto count = static_cast<std::size_t>(bytes / static_cast<std::int64_t>(sizeof(float)));
  dtw::launch(p, [&](dtw::Comm& comm) {
    // Zeros: repeated in-place sums stay finite and never reach denormals.
    std::vector<float> data(count, 0.0f);
    for (int w = 0; w < 3; ++w) dtw::ch01::allreduce(comm, std::span<float>(data), dtw::ReduceOp::kSum, algo);
    comm.barrier();
    if (comm.rank() == 0) {
      for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        dtw::ch01::allreduce(comm, std::span<float>(data), dtw::ReduceOp::kSum, algo);
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    } else {
      for (benchmark::IterationCount i = 0; i < state.max_iterations; ++i)
        dtw::ch01::allreduce(comm, std::span<float>(data), dtw::ReduceOp::kSum, algo);
    }
  });
  // nccl-tests' definitions: algbw = bytes / time, busbw = algbw * 2(p-1)/p.
  const double moved = static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9;
  state.counters["algbw"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  state.counters["busbw"] = benchmark::Counter(moved * 2.0 * (p - 1) / p, benchmark::Counter::kIsRate);
  state.counters["ranks"] = p;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

const int kRegistered = [] {
  using dtw::ch01::AllreduceAlgo;
  for (AllreduceAlgo algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                             AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect}) {
    const std::string name = "BM_Allreduce/" + std::string(dtw::ch01::name_of(algo));
    benchmark::RegisterBenchmark(name.c_str(), BM_Allreduce, algo)
        ->ArgName("bytes")
        ->Arg(8)
        ->Arg(4 << 10)
        ->Arg(256 << 10)
        ->Arg(4 << 20)
        ->Arg(64 << 20)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();
// Two allreduces of `bytes` each (two gradient buckets), one after the other
// (blocking ring) or both in flight at once (iallreduce, waited for in order):
// BM_TwoAllreduces/sequential/<bytes> against BM_TwoAllreduces/concurrent/<bytes>.
// On the threads backend a rank advances both rings itself, so concurrency can
// only overlap one ring's waiting with the other's copying.
void BM_TwoAllreduces(benchmark::State& state, bool concurrent) {
  const int p = bench_ranks();
  const auto bytes = static_cast<std::int64_t>(state.range(0));
  const auto count = static_cast<std::size_t>(bytes / static_cast<std::int64_t>(sizeof(float)));
  const auto both = [&](dtw::Comm& comm, std::vector<float>& a, std::vector<float>& b) {
    using dtw::ch01::iallreduce;
    if (concurrent) {
      dtw::ch01::PendingCollective first = iallreduce(comm, std::span<float>(a), dtw::ReduceOp::kSum);
      dtw::ch01::PendingCollective second = iallreduce(comm, std::span<float>(b), dtw::ReduceOp::kSum);
      first.wait();
      second.wait();
    } else {
      dtw::ch01::allreduce(comm, std::span<float>(a), dtw::ReduceOp::kSum);
      dtw::ch01::allreduce(comm, std::span<float>(b), dtw::ReduceOp::kSum);
    }
  };
  dtw::launch(p, [&](dtw::Comm& comm) {
    std::vector<float> a(count, 0.0f), b(count, 0.0f);
    for (int w = 0; w < 2; ++w) both(comm, a, b);
    comm.barrier();
    if (comm.rank() == 0) {
      for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        both(comm, a, b);
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    } else {
      for (benchmark::IterationCount i = 0; i < state.max_iterations; ++i) both(comm, a, b);
    }
  });
  const double moved = 2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9;
  state.counters["algbw"] = benchmark::Counter(moved, benchmark::Counter::kIsRate);
  state.counters["busbw"] = benchmark::Counter(moved * 2.0 * (p - 1) / p, benchmark::Counter::kIsRate);
  state.counters["ranks"] = p;
}

const int kRegisteredTwo = [] {
  for (const bool concurrent : {false, true}) {
    const std::string name =
        std::string("BM_TwoAllreduces/") + (concurrent ? "concurrent" : "sequential");
    benchmark::RegisterBenchmark(name.c_str(), BM_TwoAllreduces, concurrent)
        ->ArgName("bytes")
        ->Arg(16 << 20)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}();
#else
void BM_Allreduce(benchmark::State& state) {
  state.SkipWithError("chapter 01's solution library (dtw_ch01_solution) is not built");
  for (auto _ : state) {
  }
}
BENCHMARK(BM_Allreduce);
#endif

}  // namespace

BENCHMARK_MAIN();
