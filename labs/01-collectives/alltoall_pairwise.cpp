// Step 01.11, pairwise-exchange all-to-all: `in` and `out` hold p blocks of
// m = in.size() / p elements; afterwards block i of rank r's `out` holds block
// r of rank i's `in` (the transpose of the p×p matrix of blocks). The exchange
// behind Ulysses sequence parallelism and MoE token routing.
//
// Contract: same sizes and tag on every rank (dispatch.cpp has checked that
// in.size() == out.size(), divisible by p, and that they do not overlap; p
// may be 1). Each step is a permutation: every rank sends one block and
// receives one, so no rank is flooded by p-1 senders at once. A block that
// arrives with another count than m is reported with expect_count, naming
// "alltoall". No step may deadlock, whatever p.
//
// Bytes on the wire: every block but a rank's own leaves once, m elements to
// each other rank; every pair exchanges exactly one block each way (the test
// counts them). Cost (p-1)α + n(p-1)/p·β, n = in.size().
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void alltoall_pairwise(Comm& comm, std::span<const T> in, std::span<T> out, int tag) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t m = in.size() / static_cast<std::size_t>(p);
  const auto block = [m](auto span, int i) {
    return span.subspan(static_cast<std::size_t>(i) * m, m);
  };

  DTW_TODO("01.11: All-to-all by pairwise exchange: p-1 steps, one partner each.");
}

#define DTW_INSTANTIATE(T) \
  template void alltoall_pairwise<T>(Comm&, std::span<const T>, std::span<T>, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
