// Step 00.1: ping_pong measures round trips between two ranks, and
// fit_alpha_beta turns them into the α-β model T(n) = α + n·β (the chapter
// text, "The α-β model" and "What each piece must get right").
//
// Contract (ranks_and_messages.h): every rank calls ping_pong with the same
// arguments, which are checked before your code runs. peer_a returns one
// sample per size, in the order of `sizes`, holding the fastest of `repeats`
// timed round trips; every other rank returns an empty vector. fit_alpha_beta
// gets samples with at least two distinct sizes and times > 0 (checked).
//
// Bytes on the wire: per size, (repeats + 1) messages of `bytes` from peer_a
// to peer_b and as many back; nothing to or from any other rank. The tests
// count them, and run peer_a on a scripted link whose sends and receives take
// known times, to check that each sample is the fastest whole round trip.
#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using Clock = std::chrono::steady_clock;

// One tag for the whole benchmark.
constexpr int kPingTag = 1;
DTW_NAME_TAG(kPingTag);  // deadlock reports print "tag 1 (kPingTag)"

void check_ping_pong_args(const Comm& comm, std::span<const std::int64_t> sizes, int repeats,
                          int peer_a, int peer_b) {
  const int p = comm.size(), r = comm.rank();
  DTW_CHECK_ARG(p >= 2, "rank " << r << ": ping_pong needs at least 2 ranks, the world has " << p);
  DTW_CHECK_ARG(peer_a >= 0 && peer_a < p && peer_b >= 0 && peer_b < p,
                "rank " << r << ": ping_pong between ranks " << peer_a << " and " << peer_b
                        << ": a peer is out of range [0, " << p << ")");
  DTW_CHECK_ARG(peer_a != peer_b, "rank " << r << ": ping_pong needs two different ranks, got "
                                          << peer_a << " twice");
  DTW_CHECK_ARG(repeats >= 1,
                "rank " << r << ": ping_pong with repeats " << repeats << ": need at least 1");
  for (std::size_t i = 0; i < sizes.size(); ++i)
    DTW_CHECK_ARG(sizes[i] >= 0, "rank " << r << ": ping_pong size " << i << " is " << sizes[i]
                                         << " bytes: sizes must be >= 0");
}

}  // namespace

std::vector<PingPongSample> ping_pong(Comm& comm, std::span<const std::int64_t> sizes, int repeats,
                                      int peer_a, int peer_b) {
  check_ping_pong_args(comm, sizes, repeats, peer_a, peer_b);
  DTW_TODO("00.1: Time round trips between peer_a and peer_b for every size; peer_a keeps the fastest.");
}

AlphaBeta fit_alpha_beta(std::span<const PingPongSample> samples) {
  std::set<std::int64_t> distinct;
  for (const PingPongSample& s : samples) {
    DTW_CHECK_ARG(s.round_trip_seconds > 0, "fit_alpha_beta: the sample of "
                                                << s.bytes << " bytes has round trip "
                                                << s.round_trip_seconds
                                                << " s: a measured time must be > 0");
    distinct.insert(s.bytes);
  }
  DTW_CHECK_ARG(distinct.size() >= 2,
                "fit_alpha_beta needs samples of at least 2 distinct sizes, got "
                    << samples.size() << " samples of " << distinct.size() << " distinct size(s)");

  DTW_TODO("00.1: Fit one-way time = alpha + beta * bytes so that every size counts alike.");
}

}  // namespace dtw::ch00
