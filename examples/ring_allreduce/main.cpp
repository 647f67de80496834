// Chapter 01's ring allreduce on data of your own: five ranks each hold a
// vector; afterwards every rank holds the element-wise sum, checked here
// against the sum computed directly. Exits 1 on a wrong element.
#include <dtw/dtw.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include "collectives.h"  // dtw::ch01, installed with dtw::ch01

namespace {
// Rank r's value at index i: any formula works; integers keep the sum exact.
std::int64_t value(int rank, std::size_t i) {
  return static_cast<std::int64_t>(rank + 1) * 1000 + static_cast<std::int64_t>(i % 97);
}
}  // namespace

int main() {
  constexpr int kRanks = 5;
  constexpr std::size_t kCount = 1001;  // not a multiple of 5: uneven chunks
  std::vector<int> wrong(kRanks, 0);
  const dtw::Report report = dtw::launch(kRanks, [&](dtw::Comm& comm) {
    std::vector<std::int64_t> data(kCount);
    for (std::size_t i = 0; i < kCount; ++i) data[i] = value(comm.rank(), i);
    dtw::ch01::allreduce(comm, std::span<std::int64_t>(data), dtw::ReduceOp::kSum,
                         dtw::ch01::AllreduceAlgo::kRing);
    for (std::size_t i = 0; i < kCount; ++i) {
      std::int64_t expected = 0;
      for (int r = 0; r < kRanks; ++r) expected += value(r, i);
      if (data[i] != expected) ++wrong[static_cast<std::size_t>(comm.rank())];
    }
  });
  std::printf("ring allreduce of %zu int64 on %d ranks: %lld bytes sent in all\n", kCount, kRanks,
              static_cast<long long>(report.total_bytes()));
  for (int r = 0; r < kRanks; ++r)
    if (wrong[static_cast<std::size_t>(r)] != 0) {
      std::fprintf(stderr, "ring_allreduce: rank %d has %d wrong elements\n", r,
                   wrong[static_cast<std::size_t>(r)]);
      return 1;
    }
  // The ring moves 2(p-1)/p of the data per rank: 2 * 4 * 1001 * 8 bytes in all.
  const long long expected_bytes = 2LL * (kRanks - 1) * kCount * 8;
  if (report.total_bytes() != expected_bytes) {
    std::fprintf(stderr, "ring_allreduce: expected %lld bytes on the wire, got %lld\n",
                 expected_bytes, static_cast<long long>(report.total_bytes()));
    return 1;
  }
  std::puts("every rank holds the sum");
  return 0;
}
