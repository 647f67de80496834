// Step 00.2: token_ring passes one value around the ring of ranks
// 0 → 1 → … → p−1 → 0, `laps` times, then hands the result to every rank
// (the chapter text, "What each piece must get right").
//
// Contract (ranks_and_messages.h): rank 0 starts with `token`; every rank
// adds (its rank + 1) each time it holds the token, so after the laps rank 0
// holds token + laps·p(p+1)/2, and every rank returns that value. `laps` >= 0
// (checked before your code runs).
//
// Bytes on the wire: only ever from a rank to its right neighbour. Every link
// r → r+1 (and p−1 → 0) carries one 8-byte token per lap; the links 0 → 1,
// 1 → 2, …, p−2 → p−1 carry one more message each, the result; the link
// p−1 → 0 carries nothing else. A world of one rank sends nothing. The tests
// read this traffic matrix exactly.
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

// Two tags keep the two phases apart: a token is never taken for a result.
constexpr int kTokenTag = 2;
constexpr int kResultTag = 3;
DTW_NAME_TAG(kTokenTag);
DTW_NAME_TAG(kResultTag);

}  // namespace

std::int64_t token_ring(Comm& comm, std::int64_t token, int laps) {
  const int p = comm.size(), r = comm.rank();
  DTW_CHECK_ARG(laps >= 0,
                "rank " << r << ": token_ring with laps " << laps << ": laps must be >= 0");

  DTW_TODO("00.2: Pass the token around the ring `laps` times.");

  DTW_TODO("00.2: Give every rank the final token.");
}

}  // namespace dtw::ch00
