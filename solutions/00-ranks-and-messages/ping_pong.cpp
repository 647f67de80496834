// Ping-pong: the oldest benchmark of a network, and the source of the two
// numbers every cost model in this workbench starts from.
//
// Rank a sends n bytes to rank b; b sends them straight back. The time from
// a's send to a's receive is one round trip, 2·T(n). Repeat it for sizes from
// a few bytes to many megabytes and fit a line through the one-way times:
//
//     T(n) = α + n·β
//
// α (seconds) is what a message costs before any byte moves: the call, the
// matching of sender and receiver, the wake-up of a waiting thread. β
// (seconds per byte) is the price of each byte once it flows: 1/β is the
// bandwidth. Small messages are all α, large ones all β.
#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using Clock = std::chrono::steady_clock;

// One tag for the whole benchmark: messages between one pair of ranks with
// one tag arrive in the order they were sent, so the sizes cannot mix up.
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
  const int me = comm.rank();
  // Bystanders take no part: a point-to-point benchmark measures one link.
  if (me != peer_a && me != peer_b) return {};
  const bool initiator = me == peer_a;
  const int other = initiator ? peer_b : peer_a;

  // One buffer, as large as the largest message; each size uses a prefix.
  // Touching it now keeps page faults out of the timed loop.
  const std::int64_t largest = sizes.empty() ? 0 : *std::ranges::max_element(sizes);
  std::vector<std::byte> buffer(static_cast<std::size_t>(largest), std::byte{1});
  std::vector<PingPongSample> samples;

  // Each round trip: peer_a sends, then receives the echo; peer_b receives,
  // then sends it back. Only peer_a times (std::chrono::steady_clock).
  // @lab 00.1: Time round trips between peer_a and peer_b for every size; peer_a keeps the fastest.
  // @hint 1: Per size: 1 warm-up + `repeats` timed round trips; keep the fastest.
  // @hint 2: Only peer_a sends first; if both sent first, two synchronous sends would wait for each
  // @hint 2: other for ever.
  for (const std::int64_t n : sizes) {
    std::span<std::byte> message(buffer.data(), static_cast<std::size_t>(n));
    // The fastest of several tries, not the mean: on a shared machine noise
    // only ever adds time, so the minimum is the best view of the link itself.
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i <= repeats; ++i) {  // i == 0 is the warm-up
      if (initiator) {
        const Clock::time_point start = Clock::now();
        comm.send(message, other, kPingTag);
        comm.recv(message, other, kPingTag);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (i > 0) best = std::min(best, seconds);
      } else {
        // The mirror image: receive first, then answer. Had b also sent
        // first, both would sit in a synchronous send forever.
        comm.recv(message, other, kPingTag);
        comm.send(message, other, kPingTag);
      }
    }
    if (initiator) samples.push_back({n, best});
  }
  // @end
  return samples;
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

  // Which line? Plain least squares minimises the squared errors in seconds,
  // so a 64 MiB message that is off by 1% (50 us) outweighs a thousand 8-byte
  // messages off by 100% (0.5 us): alpha comes out as noise, often negative.
  // We minimise squared *relative* errors instead, sum(((a + b*x - y) / y)^2),
  // which treats every size alike: it is least squares with weight 1/y^2.
  // @lab 00.1: Fit one-way time = alpha + beta * bytes so that every size counts alike.
  // @hint 1: Fit y = rtt/2 against x = bytes by least squares with weights 1/y^2.
  // @hint 2: Centre the weighted means before multiplying (sxy, sxx): the textbook n*sum(x^2) -
  // @hint 2: sum(x)^2 loses digits when sizes sit close together.
  double sum_w = 0, mean_x = 0, mean_y = 0;
  for (const PingPongSample& s : samples) {
    const double y = s.round_trip_seconds / 2;  // one way is half a round trip
    const double w = 1 / (y * y);
    sum_w += w;
    mean_x += w * static_cast<double>(s.bytes);
    mean_y += w * y;
  }
  mean_x /= sum_w;
  mean_y /= sum_w;
  // Subtract the means before multiplying: the centred form is the
  // numerically stable one. The textbook n*sum(x^2) - sum(x)^2 subtracts
  // large, nearly equal numbers whenever the sizes sit close together.
  double sxy = 0, sxx = 0;
  for (const PingPongSample& s : samples) {
    const double y = s.round_trip_seconds / 2;
    const double w = 1 / (y * y);
    const double dx = static_cast<double>(s.bytes) - mean_x;
    sxy += w * dx * (y - mean_y);
    sxx += w * dx * dx;
  }
  const double beta = sxy / sxx;  // sxx > 0: there are two distinct sizes
  return {mean_y - beta * mean_x, beta};
  // @end
}

}  // namespace dtw::ch00
