// Point-to-point latency and bandwidth of the threads backend, next to a plain
// memcpy of the same size: a message between two rank threads is one copy, so
// memcpy is the ceiling it is measured against.
//
// Each benchmark launches its world once and loops inside it (the launch cost
// is not measured); rank 0 times every iteration itself (manual time). A
// zero-element message tells rank 1 the loop is over.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "dtw/dtw.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Times one memcpy of `bytes` (the reference the message is compared with).
double time_memcpy(std::vector<std::byte>& dst, const std::vector<std::byte>& src) {
  const auto t0 = Clock::now();
  std::memcpy(dst.data(), src.data(), dst.size());
  benchmark::ClobberMemory();
  return seconds_between(t0, Clock::now());
}

// Rank 1's side: echo (ping-pong) or just receive (stream) until the stop message.
void serve(dtw::Comm& comm, std::vector<std::byte>& buf, bool echo) {
  for (;;) {
    const std::int64_t n = comm.recv(buf, 0, 0);
    if (n == 0) return;
    if (echo) comm.send(std::span<const std::byte>(buf).first(static_cast<std::size_t>(n)), 0, 0);
  }
}

// Round trip of `bytes` between two ranks: rank 0 sends, rank 1 sends it back.
// bytes_per_second is the one-way rate, 2*bytes per round trip; memcpy_frac is
// that rate over memcpy's rate for the same size, measured in the same iterations.
void BM_PingPong(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  double memcpy_s = 0, total_s = 0;
  dtw::launch(2, [&](dtw::Comm& comm) {
    std::vector<std::byte> buf(bytes, std::byte{1});
    if (comm.rank() == 1) return serve(comm, buf, true);
    std::vector<std::byte> copy(bytes);
    for (auto _ : state) {
      const auto t0 = Clock::now();
      comm.send(buf, 1, 0);
      comm.recv(buf, 1, 0);
      const double rtt = seconds_between(t0, Clock::now());
      state.SetIterationTime(rtt);
      total_s += rtt;
      memcpy_s += time_memcpy(copy, buf);
    }
    comm.send(std::span<const std::byte>(), 1, 0);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
  state.counters["rtt_us"] = total_s * 1e6 / static_cast<double>(state.iterations());
  // frac = (2*bytes/rtt) / (bytes/memcpy) = 2*memcpy/rtt, summed over iterations.
  state.counters["memcpy_frac"] = 2 * memcpy_s / total_s;
}

// One-way stream: rank 0 sends `bytes` again and again, rank 1 receives. A
// blocking send is synchronous, so each iteration is one complete transfer.
void BM_SendRecv(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  double memcpy_s = 0, total_s = 0;
  dtw::launch(2, [&](dtw::Comm& comm) {
    std::vector<std::byte> buf(bytes, std::byte{1});
    if (comm.rank() == 1) return serve(comm, buf, false);
    std::vector<std::byte> copy(bytes);
    for (auto _ : state) {
      const auto t0 = Clock::now();
      comm.send(buf, 1, 0);
      const double t = seconds_between(t0, Clock::now());
      state.SetIterationTime(t);
      total_s += t;
      memcpy_s += time_memcpy(copy, buf);
    }
    comm.send(std::span<const std::byte>(), 1, 0);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["memcpy_frac"] = memcpy_s / total_s;
}

// The ceiling: one thread copying `bytes` from one buffer to another.
void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  for (auto _ : state) state.SetIterationTime(time_memcpy(dst, src));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

// 8 B, then 16 B * 4^k up to 256 MiB (64 KiB is the eager/receiver-copy boundary).
void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(8);
  for (std::int64_t n = 16; n <= (std::int64_t{256} << 20); n *= 4) b->Arg(n);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_PingPong)->Apply(sizes);
BENCHMARK(BM_SendRecv)->Apply(sizes);
BENCHMARK(BM_Memcpy)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
