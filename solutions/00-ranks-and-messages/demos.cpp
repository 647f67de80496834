// Chapter 00's demos for `dtw run` and `dtw tour`. Each one runs a solution
// on every rank and checks the result against what it must be.
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "dtw/demo.h"
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

// What rank r puts at index i of the halo it sends in direction `dir`
// (0 = left, 1 = right): distinct for every (rank, direction, index), so a
// message delivered to the wrong place cannot pass the check.
double halo_value(int r, int dir, std::size_t i) {
  return r * 1e6 + dir * 1e5 + static_cast<double>(i);
}

// The tags of neighbor_exchange.cpp, named the same in reports.
constexpr int kLeftward = 4;
constexpr int kRightward = 5;
DTW_NAME_TAG(kLeftward);
DTW_NAME_TAG(kRightward);

// The halo exchange written the tempting way, to be caught: each rank sends
// to its left, then to its right, then receives. A blocking send returns only
// once the receiver has the data, so rank r waits in its first send for rank
// r-1, which waits in its own first send for rank r-2 ... and rank 0 waits for
// rank p-1: the wait-for graph is the ring itself, closed into a cycle, and
// the threads backend raises DeadlockError with it. (Under MPI the same code
// often "works" for small messages, which MPI buffers eagerly, and hangs the
// day the halo grows.) Not part of the contract: this demo's only.
template <class T>
void exchange_unsafe(Comm& comm, std::span<const T> to_left, std::span<const T> to_right,
                     std::span<T> from_left, std::span<T> from_right) {
  const int p = comm.size(), r = comm.rank();
  const int left = (r + p - 1) % p, right = (r + 1) % p;
  comm.send(to_left, left, kLeftward);  // every rank blocks here ...
  comm.send(to_right, right, kRightward);
  comm.recv(from_right, right, kLeftward);  // ... and never gets here
  comm.recv(from_left, left, kRightward);
}

DemoCheck run_ping_pong(Comm& comm) {
  // Small messages are cheap, so they get many repeats to find a quiet
  // moment; large ones take milliseconds each and need only a few.
  const std::vector<std::int64_t> small{8, 64, 512, 4 << 10, 32 << 10};
  const std::vector<std::int64_t> large{256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::vector<PingPongSample> samples = ping_pong(comm, small, 1000);
  const std::vector<PingPongSample> more = ping_pong(comm, large, 10);
  if (comm.rank() != 0)
    return {true, comm.rank() == 1 ? "echoed rank 0's messages" : "idle: not one of the pair", 0};
  samples.insert(samples.end(), more.begin(), more.end());

  const AlphaBeta fit = fit_alpha_beta(samples);
  std::printf("%12s %14s %14s %14s %12s\n", "bytes", "round trip us", "one way us", "model us",
              "GB/s");
  for (const PingPongSample& s : samples) {
    const double one_way = s.round_trip_seconds / 2;
    std::printf("%12lld %14.2f %14.2f %14.2f %12.3f\n", static_cast<long long>(s.bytes),
                s.round_trip_seconds * 1e6, one_way * 1e6, fit.seconds(s.bytes) * 1e6,
                static_cast<double>(s.bytes) / one_way / 1e9);
  }
  const double gbps = 1e-9 / fit.beta_seconds_per_byte;
  // n_half = α/β: the message size at which latency and bandwidth cost the
  // same. Below it, send fewer messages; above it, send fewer bytes.
  const double n_half = fit.alpha_seconds / fit.beta_seconds_per_byte;
  std::printf(
      "fit T(n) = alpha + n*beta: alpha = %.2f us, beta = %.4g ns/B (1/beta = %.2f GB/s), "
      "n_half = alpha/beta = %.0f B\n",
      fit.alpha_seconds * 1e6, fit.beta_seconds_per_byte * 1e9, gbps, n_half);
  std::printf("smallest message one way: %.2f us\n", samples.front().round_trip_seconds / 2 * 1e6);

  const bool sane = fit.alpha_seconds > 0 && fit.beta_seconds_per_byte > 0;
  char detail[160];
  std::snprintf(detail, sizeof detail, "alpha %.2f us, beta %.3g ns/B (%.2f GB/s)%s",
                fit.alpha_seconds * 1e6, fit.beta_seconds_per_byte * 1e9, gbps,
                sane ? "" : " -- not a sane fit (alpha and beta must be > 0)");
  const PingPongSample& last = samples.back();
  return {sane, detail, static_cast<double>(last.bytes) / (last.round_trip_seconds / 2) / 1e9};
}

DemoCheck run_token_ring(Comm& comm) {
  const std::int64_t start = 1000;
  const int laps = 3;
  const std::int64_t p = comm.size();
  const std::int64_t expected = start + laps * p * (p + 1) / 2;
  const std::int64_t got = token_ring(comm, start, laps);
  return {got == expected,
          "token " + std::to_string(got) + ", expected " + std::to_string(expected) + " after " +
              std::to_string(laps) + " laps",
          0};
}

DemoCheck run_halo_exchange(Comm& comm) {
  const std::size_t n = 1000;
  const int p = comm.size(), r = comm.rank();
  const int left = (r + p - 1) % p, right = (r + 1) % p;
  std::vector<double> to_left(n), to_right(n), from_left(n), from_right(n);
  for (std::size_t i = 0; i < n; ++i) {
    to_left[i] = halo_value(r, 0, i);
    to_right[i] = halo_value(r, 1, i);
  }
  exchange_with_neighbors<double>(comm, to_left, to_right, from_left, from_right);
  for (std::size_t i = 0; i < n; ++i) {
    // from_left is what the left neighbour sent right, and vice versa.
    const double want_left = halo_value(left, 1, i), want_right = halo_value(right, 0, i);
    if (from_left[i] != want_left || from_right[i] != want_right)
      return {false,
              "index " + std::to_string(i) + ": halo from rank " +
                  std::to_string(from_left[i] != want_left ? left : right) + " is wrong",
              0};
  }
  return {true, std::to_string(n) + " doubles from each neighbour", 0};
}

DemoCheck run_deadlock(Comm& comm) {
  std::vector<float> to_left(256, 1.0f), to_right(256, 2.0f), from_left(256), from_right(256);
  exchange_unsafe<float>(comm, std::span<const float>(to_left), std::span<const float>(to_right),
                         std::span<float>(from_left), std::span<float>(from_right));
  return {false, "exchange_unsafe returned: the deadlock detector missed it", 0};
}

DTW_REGISTER_DEMO(
    {.name = "ping-pong",
     .chapter = "00",
     .description = "round trips of 8 B to 64 MiB between ranks 0 and 1; fits alpha, beta",
     .default_ranks = 2,
     .min_ranks = 2,
     .max_ranks = 2,  // ranks 0 and 1 measure; more would idle, each counted 64 MiB
     .expects_deadlock = false,
     .bytes_per_rank = 64 << 20,  // the largest message's buffer
     .run = run_ping_pong});
DTW_REGISTER_DEMO({.name = "token-ring",
                   .chapter = "00",
                   .description = "a token three times around the ring, every rank adds rank+1",
                   .default_ranks = 8,
                   .min_ranks = 1,
                   .expects_deadlock = false,
                   .run = run_token_ring});
DTW_REGISTER_DEMO({.name = "halo-exchange",
                   .chapter = "00",
                   .description = "safe periodic neighbour exchange of 1000 doubles each way",
                   .default_ranks = 4,
                   .min_ranks = 1,
                   .expects_deadlock = false,
                   .run = run_halo_exchange});
DTW_REGISTER_DEMO(
    {.name = "deadlock",
     .chapter = "00",
     .description = "the unsafe exchange (send, send, recv, recv): caught by the detector",
     .default_ranks = 2,
     .min_ranks = 1,
     .expects_deadlock = true,
     .run = run_deadlock});

}  // namespace
}  // namespace dtw::ch00
