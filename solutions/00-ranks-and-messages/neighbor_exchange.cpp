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
  // @lab 00.3: Exchange halos with both neighbours so that no rank can block in a send.
  // @hint 1: Every rank sends two halos and receives two, all at the same time. Never block on
  // @hint 1: a send while a receive you owe is not yet posted: have all four messages in flight
  // @hint 1: before anyone waits, then check that each halo arrived whole.
  // @hint 2: left = r - 1, right = r + 1 (mod p). Post the receive of from_left (from left,
  // @hint 2: tag kRightward) and of from_right (from right, kLeftward); then the sends: to_right
  // @hint 2: first (to right, kRightward), then to_left (to left, kLeftward); then wait for all
  // @hint 2: four; then check both counts. Traps: a blocking send, or a wait before the last
  // @hint 2: post, closes the wait-for cycle; the tag names the direction of travel, not the
  // @hint 2: side it arrives on; a request never waited for is an error.
  // @hint 3: std::array<Request, 4> requests; requests[0] = comm.irecv(from_left, left,
  // @hint 3: kRightward) ... comm.isend(to_right, right, kRightward); comm.wait_all(requests);
  // @hint 3: check_arrived(comm, requests[0].received_count(), from_left.size(), left,
  // @hint 3: "from_left"), and the same for from_right.
  // How this solution works (the lab shows none of it):
  // Receives first: whatever a neighbour sends can land at once, so no send
  // waits on a receive that is not posted yet. Then both sends. Nothing
  // blocks until wait_all, by which time all four messages are in flight.
  // (With p = 1 both neighbours are this rank; non-blocking calls make that
  // work too, as the send no longer has to finish before the receive starts.)
  // The sends go in the order of the receives they feed: rightward first.
  // MPI and the threads backend match by tag and would not care, but NCCL
  // has no tags and pairs two ranks' messages in posting order; with p = 2
  // the left and right neighbour are the same rank, and the other order
  // would swap the halos.
  // Check yourself, answered: with p = 2 the tag (the direction of travel)
  // keeps the neighbour's two messages apart. Waiting for the receives before
  // posting the sends leaves every rank waiting for a send nobody posts: the
  // cycle again. MPI buffers small messages ("eager"), so blocking sends
  // return at once and the bug hides until the halos grow past the eager
  // limit ("rendezvous"). Ordering by parity turns partly sequential for odd
  // p, where ranks p-1 and 0 are both even and neighbours.
  const int p = comm.size(), r = comm.rank();
  const int left = (r + p - 1) % p, right = (r + 1) % p;
  std::array<Request, 4> requests;
  requests[0] = comm.irecv(from_left, left, kRightward);
  requests[1] = comm.irecv(from_right, right, kLeftward);
  requests[2] = comm.isend(to_right, right, kRightward);
  requests[3] = comm.isend(to_left, left, kLeftward);
  comm.wait_all(requests);
  check_arrived(comm, requests[0].received_count(), from_left.size(), left, "from_left");
  check_arrived(comm, requests[1].received_count(), from_right.size(), right, "from_right");
  // @end
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
