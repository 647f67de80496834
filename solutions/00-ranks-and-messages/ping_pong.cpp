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
  // @lab 00.1: Time round trips between peer_a and peer_b for every size; peer_a keeps the fastest.
  // @hint 1: For each size, the pair bounces one message there and back once without timing it
  // @hint 1: (the warm-up), then `repeats` more times while the first peer times each whole round
  // @hint 1: trip on its own clock; it keeps the fastest, because noise only ever adds time. The
  // @hint 1: other peer only echoes, and every other rank stays out of it.
  // @hint 2: Bystanders return an empty list at once. One buffer of the largest size, filled
  // @hint 2: before any timing; size n uses its first n bytes. Per size: for i in 0..repeats:
  // @hint 2: peer_a: start the clock, send, receive the echo, stop; keep min over i >= 1.
  // @hint 2: peer_b: receive, then send it back. Traps: if peer_b also sent first, two
  // @hint 2: synchronous sends would wait for each other for ever; a clock started after the send
  // @hint 2: times only the way back; the sample holds the whole round trip, not half of it.
  // @hint 3: Clock::now() before comm.send(message, peer_b, kPingTag) and after
  // @hint 3: comm.recv(message, peer_b, kPingTag), std::chrono::duration<double>(stop -
  // @hint 3: start).count() for seconds; peer_b: comm.recv(message, peer_a, kPingTag) then
  // @hint 3: comm.send(message, peer_a, kPingTag); message = std::span<std::byte>(buffer.data(), n).
  // How this solution works (the lab shows none of it):
  // Check yourself, answered:
  // - The minimum, because noise (a preempted thread, another process) only
  //   ever adds time: the fastest repeat is the link, the mean is the link
  //   plus the average interruption.
  // - A timed warm-up pays the page faults and cold caches; it is usually the
  //   slowest sample, and when it is not, it says nothing about the link.
  // - If peer_b sent first, both peers would sit in a synchronous send; the
  //   detector prints "cycle: rank 0 -> rank 1 -> rank 0", both in send.
  // - The round trip is what one clock can measure; halving it is the model's
  //   business (the fit), and a sample that is already halved gets halved twice.
  // Bystanders take no part: a point-to-point benchmark measures one link.
  const int me = comm.rank();
  if (me != peer_a && me != peer_b) return {};
  // One buffer, as large as the largest message; each size uses a prefix.
  // Filling it now keeps first-touch page faults out of the timed loop.
  const std::int64_t largest = sizes.empty() ? 0 : *std::ranges::max_element(sizes);
  std::vector<std::byte> buffer(static_cast<std::size_t>(largest), std::byte{1});
  std::vector<PingPongSample> samples;
  for (const std::int64_t n : sizes) {
    const std::span<std::byte> message(buffer.data(), static_cast<std::size_t>(n));
    // The fastest of several tries, not the mean: on a shared machine noise
    // only ever adds time, so the minimum is the best view of the link itself.
    double fastest = std::numeric_limits<double>::infinity();
    for (int i = 0; i <= repeats; ++i) {  // i == 0 is the untimed warm-up
      if (me == peer_a) {
        // The clock brackets both calls: a round trip is 2·T(n).
        Clock::time_point start = Clock::now();
        comm.send(message, peer_b, kPingTag);
        comm.recv(message, peer_b, kPingTag);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (i > 0) fastest = std::min(fastest, seconds);
      } else {
        // The mirror image: receive first, then answer. Had b also sent
        // first, both would sit in a synchronous send for ever.
        comm.recv(message, peer_a, kPingTag);
        comm.send(message, peer_a, kPingTag);
      }
    }
    if (me == peer_a) samples.push_back({n, fastest});
  }
  return samples;
  // @end
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

  // @lab 00.1: Fit one-way time = alpha + beta * bytes so that every size counts alike.
  // @hint 1: Fit the straight line through the one-way times (half of each round trip) against
  // @hint 1: the message sizes that makes the relative errors, not the errors in seconds, as
  // @hint 1: small as possible: weighted least squares, where each sample's weight is one over
  // @hint 1: its one-way time squared.
  // @hint 2: y = rtt / 2, x = bytes, w = 1 / y^2. Pass 1: sum_w and the weighted means
  // @hint 2: mx = sum(w x) / sum_w, my = sum(w y) / sum_w. Pass 2: sxy = sum(w (x - mx)(y - my)),
  // @hint 2: sxx = sum(w (x - mx)^2). beta = sxy / sxx, alpha = my - beta mx. Traps: weight 1
  // @hint 2: (or 1/y) lets the largest size decide alpha; the textbook n sum(x^2) - sum(x)^2 loses
  // @hint 2: every digit when the sizes sit close together; forgetting the half doubles both.
  // @hint 3: Two loops over samples with static_cast<double>(s.bytes); return {alpha, beta}
  // @hint 3: (AlphaBeta's alpha_seconds, beta_seconds_per_byte).
  // How this solution works (the lab shows none of it):
  // Plain least squares minimises the squared errors in seconds, so a 64 MiB
  // message that is off by 1% (50 us) outweighs a thousand 8-byte messages off
  // by 100% (0.5 us): alpha comes out as noise, often negative. Minimising
  // sum(((a + b*x - y) / y)^2) treats every size alike: least squares with
  // weight 1/y^2, and the same closed form with weighted means.
  // Check yourself, answered: unweighted, the 64 MiB sample's 50 us of bend
  // away from a line outweighs every small sample's 0.5 us, so the line is
  // fitted to the large sizes alone and crosses x = 0 below zero; weights
  // 1/y^2 minimise the squared *relative* error. The centred form subtracts
  // the means before squaring (small, exact differences); the textbook form
  // squares first and subtracts two huge, nearly equal sums.
  const auto one_way = [](const PingPongSample& s) { return s.round_trip_seconds / 2; };
  const auto weight = [](double y) { return 1 / (y * y); };  // relative error, squared
  double sum_w = 0, mean_x = 0, mean_y = 0;
  for (const PingPongSample& s : samples) {
    const double y = one_way(s);
    const double w = weight(y);
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
    const double y = one_way(s);
    const double w = weight(y);
    const double dx = static_cast<double>(s.bytes) - mean_x;
    sxy += w * dx * (y - mean_y);
    sxx += w * dx * dx;
  }
  const double beta = sxy / sxx;  // sxx > 0: there are two distinct sizes
  return {mean_y - beta * mean_x, beta};
  // @end
}

}  // namespace dtw::ch00
