// Neighbour exchange: the halo swap of every stencil code, and of sequence-
// parallel attention later in this workbench.
//
//      rank r-1                 rank r                  rank r+1
//   [ ... | to_right ] --> [ from_left | ... | from_right ] <-- [ to_left | ... ]
//   [ ... | from_right] <-- [ to_left  | ... | to_right   ] --> [ from_left | ... ]
//
// Every rank sends two messages and receives two, all at the same time. The
// danger is the order. A blocking send here is synchronous: it returns only
// once the receiver has the data. If every rank starts with `send`, every
// rank waits for a neighbour that is itself stuck in `send`: a cycle in the
// wait-for graph, and no rank can ever leave it (exchange_unsafe, below).
//
// The cure is to never block on a send while a receive you owe is not yet
// posted. Three ways to get there:
//   - post the receives first (irecv), then send, then wait for everything
//     (what we do here: four messages in flight at once);
//   - sendrecv, which does exactly that for one pair of messages;
//   - order by parity: even ranks send first while odd ranks receive first,
//     so every send meets a receive that is posted or about to be.
#include "ranks_and_messages.h"

#include <array>

namespace dtw::ch00 {
namespace {

// A tag per direction of travel. With p = 2 your left and right neighbour are
// the same rank, and both of its messages come from it; the tag is what tells
// "heading left" from "heading right". (The order guarantee would pair them
// up too, but only if both ranks send in the same order: tags make it robust.)
// Each has its own value in this chapter, and a name in deadlock reports.
constexpr int kLeftward = 4;
constexpr int kRightward = 5;
DTW_NAME_TAG(kLeftward);
DTW_NAME_TAG(kRightward);

// A message shorter than the buffer is legal for a single receive, but here it
// means the two neighbours disagree on the halo width: say so, naming both.
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
  const int p = comm.size(), r = comm.rank();
  const int left = (r + p - 1) % p, right = (r + 1) % p;

  // @lab 00.3: Exchange halos with both neighbours without any rank blocking in a send.
  // @hint 1: irecv both halos, isend both, wait_all, then check each arrived count.
  // @hint 2: Post the receives before the sends, and the sends in the order the neighbour posts the
  // @hint 2: receives they feed (rightward first): NCCL pairs messages by posting order.
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
  std::array<Request, 4> requests{
      comm.irecv(from_left, left, kRightward),
      comm.irecv(from_right, right, kLeftward),
      comm.isend(to_right, right, kRightward),
      comm.isend(to_left, left, kLeftward),
  };
  comm.wait_all(requests);
  check_arrived(comm, requests[0].received_count(), from_left.size(), left, "from_left");
  check_arrived(comm, requests[1].received_count(), from_right.size(), right, "from_right");
  // @end
}

// The tempting version, kept to be caught. Each rank sends to its left, then
// to its right, then receives. With synchronous sends rank r waits in its
// first send for rank r-1 to receive, but rank r-1 waits in its own first send
// for rank r-2 ... and rank 0 waits for rank p-1. The wait-for graph is the
// ring itself, closed into a cycle; the threads backend sees that every rank
// is blocked and raises DeadlockError with the cycle. (Under MPI the same code
// often "works" for small messages because MPI buffers them eagerly, and then
// hangs in production once the halo grows: the worst kind of bug.)
template <NumericElement T>
void exchange_unsafe(Comm& comm, std::span<const T> to_left, std::span<const T> to_right,
                     std::span<T> from_left, std::span<T> from_right) {
  const int p = comm.size(), r = comm.rank();
  const int left = (r + p - 1) % p, right = (r + 1) % p;
  comm.send(to_left, left, kLeftward);  // every rank blocks here ...
  comm.send(to_right, right, kRightward);
  comm.recv(from_right, right, kLeftward);  // ... and never gets here
  comm.recv(from_left, left, kRightward);
}

// The element types the contract promises (see ranks_and_messages.h).
#define DTW_CH00_INSTANTIATE(T)                                                                 \
  template void exchange_with_neighbors<T>(Comm&, std::span<const T>, std::span<const T>,       \
                                           std::span<T>, std::span<T>);                         \
  template void exchange_unsafe<T>(Comm&, std::span<const T>, std::span<const T>, std::span<T>, \
                                   std::span<T>)
DTW_CH00_INSTANTIATE(float);
DTW_CH00_INSTANTIATE(double);
DTW_CH00_INSTANTIATE(std::int32_t);
DTW_CH00_INSTANTIATE(std::int64_t);
#undef DTW_CH00_INSTANTIATE

}  // namespace dtw::ch00
