// Token ring: one value visits every rank in turn.
//
//            +--------+     +--------+     +--------+
//      +---> | rank 0 | --> | rank 1 | --> | rank 2 | ---+
//      |     +--------+     +--------+     +--------+    |
//      |                                                  |
//      +-------------------- (p-1 → 0) -------------------+
//
// Each rank receives from its left neighbour and sends to its right one. Only
// the rank holding the token does any work; the others wait in recv. That is
// the point of the exercise: a ring is a chain of dependencies, and a message
// is what carries "you may go now" from one rank to the next. Chapter 01's
// ring allreduce keeps every link of this ring busy at once instead.
//
// Cost, in the α-β model of ping_pong.cpp: the p messages of a lap happen
// one after another, never two at once, so a lap of an n-byte token takes
// p·(α + n·β). With an 8-byte token that is p·α: a token ring measures
// latency, and it gets slower with every rank you add. Chapter 01's ring
// allreduce uses the same ring, but cuts the data into p chunks and keeps
// every link busy at every step: its bytes term stops growing with p, while
// its latency term, 2(p−1)·α, is still this chain.
//
// Why it cannot deadlock although every send is synchronous: at any moment
// exactly one rank holds the token and sends, and the rank it sends to is
// already waiting in recv (or soon will be), because it has nothing else to do.
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

// Two tags keep the two phases apart. The ordering guarantee would already
// do it (messages from one source with one tag arrive in order), but naming
// each phase makes a wrong receive fail loudly instead of silently taking a
// token for a result.
constexpr int kTokenTag = 2;
constexpr int kResultTag = 3;
DTW_NAME_TAG(kTokenTag);
DTW_NAME_TAG(kResultTag);

}  // namespace

std::int64_t token_ring(Comm& comm, std::int64_t token, int laps) {
  const int p = comm.size(), r = comm.rank();
  DTW_CHECK_ARG(laps >= 0,
                "rank " << r << ": token_ring with laps " << laps << ": laps must be >= 0");
  // What each rank adds: rank + 1, so that rank 0's visit shows in the result too.
  const std::int64_t mine = r + 1;

  const int right = (r + 1) % p, left = (r + p - 1) % p;
  // A one-element buffer: messages carry ranges, and a token is a range of one.
  std::int64_t value[1] = {token};

  // Mind the world of one rank: there right and left neighbour are yourself,
  // and a blocking send to yourself waits for a receive that the same thread
  // could only post after the send returned.
  // @lab 00.2: Pass the token around the ring `laps` times.
  // @hint 1: Pass the token around the ring `laps` times, each rank adding rank+1.
  // @hint 2: A world of one rank must send nothing: a blocking send to yourself waits for a receive
  // @hint 2: you can never post.
  if (p == 1) return token + static_cast<std::int64_t>(laps) * mine;
  for (int lap = 0; lap < laps; ++lap) {
    if (r == 0) {
      // Rank 0 opens each lap and closes it: the token it gets back from
      // rank p-1 carries every rank's contribution of this lap.
      value[0] += mine;
      comm.send(value, right, kTokenTag);
      comm.recv(value, left, kTokenTag);
    } else {
      comm.recv(value, left, kTokenTag);
      value[0] += mine;
      comm.send(value, right, kTokenTag);
    }
  }
  // @end

  // @lab 00.2: Give every rank the final token.
  // @hint 1: Hand rank 0's final token along the chain 0 -> 1 -> ... -> p-1.
  // Only rank 0 knows the final value now. Passing it once more along the
  // chain tells everyone: p−1 messages, one per link, none back to rank 0.
  if (r != 0) comm.recv(value, left, kResultTag);
  if (r != p - 1) comm.send(value, right, kResultTag);
  // @end
  return value[0];
}

}  // namespace dtw::ch00
