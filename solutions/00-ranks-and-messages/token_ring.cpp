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

  // @lab 00.2: Pass the token around the ring `laps` times.
  // @hint 1: The token visits every rank in order, each adding its share (its rank + 1), and
  // @hint 1: comes back to rank 0 once per lap. Only the rank that holds it works; all the
  // @hint 1: others wait for it. A world of one rank has nobody to pass it to.
  // @hint 2: left = r - 1, right = r + 1, both mod p. One rank: return token + laps (r + 1) at
  // @hint 2: once. Per lap: rank 0 adds, sends right, then receives from the left (the lap's
  // @hint 2: total); every other rank receives from the left, adds, sends right. Traps: if
  // @hint 2: rank 0 also received first, every rank would wait and none would ever send; a
  // @hint 2: blocking send to yourself (p = 1) never returns.
  // @hint 3: std::int64_t value[1] = {token}; comm.send(value, right, kTokenTag) and
  // @hint 3: comm.recv(value, left, kTokenTag); value[0] += r + 1.
  // How this solution works (the lab shows none of it):
  // A ring is a chain of dependencies: a message is what carries "you may go
  // now" from one rank to the next. It cannot deadlock although every send is
  // synchronous: one rank holds the token and sends, and the rank it sends to
  // is already waiting in recv (or soon will be), as it has nothing else to do.
  // Check yourself, answered: a lap is p messages one after another, p·(α +
  // 8β) ≈ p·α: a token ring measures latency and slows with every rank. The
  // tempting shift has every rank send at once; here only the holder sends.
  // With laps = 0 nobody adds anything and the start value goes round as the
  // result. The result needs p-1 messages: rank 0 has it already.
  const int left = (r + p - 1) % p, right = (r + 1) % p;
  const std::int64_t mine = r + 1;  // rank + 1, so that rank 0's visit shows too
  // A one-element buffer: messages carry ranges, and a token is a range of one.
  std::int64_t value[1] = {token};
  // One rank: left and right neighbour are yourself, and a blocking send to
  // yourself waits for a receive the same thread could only post afterwards.
  if (p == 1) return token + static_cast<std::int64_t>(laps) * mine;
  for (int lap = 0; lap < laps; ++lap) {
    if (r == 0) {
      // Rank 0 opens each lap and closes it: the token it gets back from
      // rank p-1 carries every rank's share of this lap.
      value[0] += mine;  // rank 0's share opens the lap
      comm.send(value, right, kTokenTag);
      comm.recv(value, left, kTokenTag);  // the lap's total
    } else {
      comm.recv(value, left, kTokenTag);
      value[0] += mine;
      comm.send(value, right, kTokenTag);  // pass it on
    }
  }
  // @end

  // @lab 00.2: Give every rank the final token.
  // @hint 1: After the last lap only rank 0 knows the result. Pass it along the chain once
  // @hint 1: more, from rank 0 to the last rank, so that everyone returns it; nothing goes back
  // @hint 1: to rank 0.
  // @hint 2: Every rank but 0 receives the result from the left; every rank but p - 1 sends it
  // @hint 2: right: p - 1 messages in all, under a tag of their own. Traps: the last rank also
  // @hint 2: holds the right value, but the chain starts at rank 0 (the tests read the traffic);
  // @hint 2: a message back to rank 0 is one nobody receives.
  // @hint 3: if (r != 0) comm.recv(value, left, kResultTag); if (r != p - 1)
  // @hint 3: comm.send(value, right, kResultTag); return value[0].
  // How this solution works (the lab shows none of it):
  // Only rank 0 knows the final value now. Passing it once more along the
  // chain tells everyone: p−1 messages, one per link, none back to rank 0.
  const int first = 0;  // the rank that holds the result
  if (r != first) comm.recv(value, left, kResultTag);
  if (right != first) comm.send(value, right, kResultTag);
  return value[0];
  // @end
}

}  // namespace dtw::ch00
