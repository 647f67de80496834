// Chapter 01's demos for `dtw run` and `dtw tour`: the solution's collectives
// on every rank, checked element by element against the backend's reference
// collective (threads: a plain fixed-order gather-reduce-send-back).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtw/demo.h"

namespace dtw::ch01 {
namespace {

// Small whole numbers: every partial sum of up to a few thousand ranks is a
// whole number below 2^24, which a float holds exactly. So the ring's order of
// additions and the reference's give bit-identical results, and the demo can
// demand equality instead of guessing a tolerance.
float demo_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1));
}

// The first index where `got` differs from `want`, as "rank r, index i: expected x, got y".
template <class T>
std::string first_mismatch(int rank, const std::vector<T>& want, const std::vector<T>& got) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) {
      return "rank " + std::to_string(rank) + ", index " + std::to_string(i) + ": expected " +
             std::to_string(want[i]) + ", got " + std::to_string(got[i]);
    }
  }
  return {};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The ring allreduce demo's array: 4 MiB of float.
constexpr std::size_t kRingCount = std::size_t{1} << 20;

DemoCheck run_ring_allreduce(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  constexpr std::size_t kCount = kRingCount;
  std::vector<float> data(kCount), want(kCount);
  for (std::size_t i = 0; i < kCount; ++i) data[i] = want[i] = demo_value(r, i);

  // Correctness first: one ring allreduce against the reference.
  allreduce(comm, std::span<float>(data), ReduceOp::kSum, AllreduceAlgo::kRing);
  comm.reference_allreduce(as_buffer(std::span<float>(want)), ReduceOp::kSum);
  const std::string wrong = first_mismatch(r, want, data);

  // Then speed: a few more rounds, timed between barriers so that every rank
  // measures the same interval. The values keep growing, which costs nothing.
  constexpr int kRounds = 10;
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i)
    allreduce(comm, std::span<float>(data), ReduceOp::kSum, AllreduceAlgo::kRing);
  comm.barrier();
  const double seconds = seconds_since(start) / kRounds;
  // nccl-tests: algbw = bytes / time; busbw = algbw · 2(p-1)/p, the rate at
  // which each link moved data (ring allreduce sends 2(p-1)/p of the array).
  const double algbw = static_cast<double>(kCount * sizeof(float)) / seconds / 1e9;
  const double busbw = p > 1 ? algbw * 2.0 * (p - 1) / p : 0.0;

  if (!wrong.empty()) return {false, wrong, busbw};
  if (p == 1) return {true, "one rank: the allreduce is a no-op, nothing to time", 0};
  // Three significant digits in a fitting unit: on 1024 ranks the rates are
  // a few MB/s, which a fixed "%.2f GB/s" showed as 0.00.
  char detail[240];
  std::snprintf(detail, sizeof detail,
                "%zu floats summed on %d ranks, equal to the reference; %.1f us per allreduce, "
                "algbw %s, busbw %s",
                kCount, p, seconds * 1e6, bandwidth_text(algbw * 1e9).c_str(),
                bandwidth_text(busbw * 1e9).c_str());
  return {true, detail, busbw};
}

// Not divisible by any small p: uneven chunks are part of the test.
constexpr std::size_t kAlgorithmsCount = 100'003;

DemoCheck run_allreduce_algorithms(Comm& comm) {
  const int r = comm.rank();
  constexpr std::size_t kCount = kAlgorithmsCount;
  std::vector<std::int64_t> want(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    want[i] = static_cast<std::int64_t>(r + 1) * static_cast<std::int64_t>(i % 1000) - 7 * r;
  std::vector<std::int64_t> input = want;
  comm.reference_allreduce(as_buffer(std::span<std::int64_t>(want)), ReduceOp::kSum);

  std::string summary;
  for (AllreduceAlgo algo : {AllreduceAlgo::kNaive, AllreduceAlgo::kBinomial, AllreduceAlgo::kRing,
                             AllreduceAlgo::kRabenseifner, AllreduceAlgo::kDirect}) {
    std::vector<std::int64_t> got(kCount);
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    allreduce(comm, std::span<const std::int64_t>(input), std::span<std::int64_t>(got),
              ReduceOp::kSum, algo);
    const double us = seconds_since(start) * 1e6;
    const std::string wrong = first_mismatch(r, want, got);
    if (!wrong.empty()) return {false, std::string(name_of(algo)) + ": " + wrong, 0};
    char part[64];
    std::snprintf(part, sizeof part, "%s%s %.0f us", summary.empty() ? "" : ", ",
                  std::string(name_of(algo)).c_str(), us);
    summary += part;
  }
  return {true,
          "int64 sum of " + std::to_string(kCount) +
              " elements, all equal to the reference: " + summary,
          0};
}

}  // namespace

DTW_REGISTER_DEMO(
    {.name = "ring-allreduce",
     .chapter = "01",
     .description = "ring allreduce of 1 Mi floats, checked against the reference, with busbw",
     .default_ranks = 8,
     .min_ranks = 1,
     .expects_deadlock = false,
     // The array and the reference's copy (the launch refuses a world that
     // cannot hold them: 32 GiB at 4096 ranks).
     .bytes_per_rank = 2 * kRingCount * sizeof(float),
     .run = run_ring_allreduce});

DTW_REGISTER_DEMO(
    {.name = "allreduce-algorithms",
     .chapter = "01",
     .description = "all five allreduce algorithms on int64, each checked against the reference",
     .default_ranks = 6,
     .min_ranks = 1,
     .expects_deadlock = false,
     // The reference, the input and one algorithm's output.
     .bytes_per_rank = 3 * kAlgorithmsCount * sizeof(std::int64_t),
     .run = run_allreduce_algorithms});

}  // namespace dtw::ch01
