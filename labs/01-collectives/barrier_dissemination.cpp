// Step 01.12, dissemination barrier (Hensgen, Finkel, Manber 1988): returns on
// a rank only once every rank has entered the barrier. No root, and no data:
// the messages are empty, their arrival is the signal.
//
// Contract: every rank calls with the same tag; p may be 1 (then it returns at
// once). The test checks that no rank leaves before all have arrived, with a
// different rank late each time, on every world size.
//
// Bytes on the wire: none. ⌈lg p⌉ rounds; in round k (k = 0, 1, ...) every
// rank sends exactly one empty message, to rank r + 2^k (mod p), and receives
// exactly one (the test counts them). Cost ⌈lg p⌉α.
#include "algorithms.h"

namespace dtw::ch01::detail {

void barrier_dissemination(Comm& comm, int tag) {
  const int p = comm.size(), r = comm.rank();
  // Empty messages: the arrival is the signal, there is nothing to carry.
  const std::span<const std::byte> nothing;
  const std::span<std::byte> none;

  DTW_TODO("01.12: Dissemination barrier: lg p rounds of signals at doubling distances.");
}

}  // namespace dtw::ch01::detail
