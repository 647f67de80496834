// Step 00.3: exchange_with_neighbors, the halo swap of every stencil code (and
// of sequence-parallel attention later in this workbench), on a periodic ring
// (the chapter text, "Safe patterns" and "What each piece must get right").
//
//      rank r-1                 rank r                  rank r+1
//   [ ... | to_right ] --> [ from_left | ... | from_right ] <-- [ to_left | ... ]
//   [ ... | from_right] <-- [ to_left  | ... | to_right   ] --> [ from_left | ... ]
//
// Contract (ranks_and_messages.h): rank r sends to_left to rank r−1 with tag
// kLeftward and to_right to rank r+1 with tag kRightward (mod p), and
// receives into from_left what r−1 sent right and into from_right what r+1
// sent left. It must return for every p, including 1 (you are your own
// neighbour) and 2 (both neighbours are the same rank), and whatever the
// halo widths, although every blocking send here is synchronous. A halo that
// arrives shorter than its buffer is an InvalidArgument naming both ranks:
// check_arrived, below, raises it.
//
// Bytes on the wire per rank: one message to each neighbour, of
// to_left.size() and to_right.size() elements; the tests count them.
#include "ranks_and_messages.h"

#include <array>

namespace dtw::ch00 {
namespace {

// A tag per direction of travel: with p = 2 your left and right neighbour are
// the same rank, and the tag tells its two messages apart. Each has its own
// value in this chapter, and a name in deadlock reports.
constexpr int kLeftward = 4;
constexpr int kRightward = 5;
DTW_NAME_TAG(kLeftward);
DTW_NAME_TAG(kRightward);

// A message shorter than the buffer is legal for a single receive, but here it
// means the two neighbours disagree on the halo width: say so, naming both.
// `got` is the element count that arrived from rank `from` into `buffer_name`.
void check_arrived(const Comm& comm, std::int64_t got, std::size_t expected, int from,
                   const char* buffer_name) {
  DTW_CHECK_ARG(got == static_cast<std::int64_t>(expected),
                "rank " << comm.rank() << ": exchange_with_neighbors: " << buffer_name << " holds "
                        << expected << " elements but rank " << from << " sent " << got);
}

}  // namespace

template <NumericElement T>
void exchange_with_neighbors(Comm& comm, std::span<const T> to_left, std::span<const T> to_right,
                             std::span<T> from_left, std::span<T> from_right) {
  DTW_TODO("00.3: Exchange halos with both neighbours so that no rank can block in a send.");
}

// The element types the contract promises (see ranks_and_messages.h).
#define DTW_CH00_INSTANTIATE(T)                                                           \
  template void exchange_with_neighbors<T>(Comm&, std::span<const T>, std::span<const T>, \
                                           std::span<T>, std::span<T>)
DTW_CH00_INSTANTIATE(float);
DTW_CH00_INSTANTIATE(double);
DTW_CH00_INSTANTIATE(std::int32_t);
DTW_CH00_INSTANTIATE(std::int64_t);
#undef DTW_CH00_INSTANTIATE

}  // namespace dtw::ch00
