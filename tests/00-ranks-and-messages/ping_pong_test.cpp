// Step 00.1: ping_pong and fit_alpha_beta. Timings are never asserted
// tightly (a shared machine is noisy); structure, traffic and the fit's
// arithmetic are asserted exactly.
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "dtw_test.h"
#include "ranks_and_messages.h"

namespace dtw::ch00 {
namespace {

using dtw::testing::launch_bounded;

DTW_TEST_STEPS(PingPongTest, "00.1");
// Argument checks run before any lab code: the skeleton has them already.
DTW_TEST_STEPS(PingPongArgumentsTest);

// Samples that follow T(n) = alpha + n*beta exactly (round trip = 2T).
std::vector<PingPongSample> exact_samples(const std::vector<std::int64_t>& sizes, double alpha,
                                          double beta) {
  std::vector<PingPongSample> out;
  for (std::int64_t n : sizes) out.push_back({n, 2 * (alpha + static_cast<double>(n) * beta)});
  return out;
}

// Fits samples that lie exactly on T(n) = alpha + n*beta and expects alpha and
// beta back to nine digits.
void expect_exact_fit(const std::vector<std::int64_t>& sizes, double alpha, double beta) {
  DTW_TRACE("fit_alpha_beta of exact samples at " << sizes.size() << " sizes, alpha "
                                                  << alpha * 1e6 << " us, 1/beta "
                                                  << 1 / beta / 1e9 << " GB/s");
  const AlphaBeta fit = fit_alpha_beta(exact_samples(sizes, alpha, beta));
  EXPECT_NEAR(fit.alpha_seconds, alpha, 1e-9 * alpha) << "alpha";
  EXPECT_NEAR(fit.beta_seconds_per_byte, beta, 1e-9 * beta) << "beta";
}

TEST(PingPongTest, FitRecoversExactAlphaAndBeta) {
  const std::vector<std::int64_t> sizes{8, 64, 512, 4096, 32768, 262144, 1 << 21, 1 << 24, 1 << 26};
  // A fast local link and a slow network link, both recovered.
  expect_exact_fit(sizes, 2e-6, 1.0 / 13e9);
  expect_exact_fit(sizes, 50e-6, 1.0 / 1.25e9);
}

TEST(PingPongTest, FitFromTwoSizesIsTheLineThroughThem) {
  expect_exact_fit({0, 1000}, 1e-6, 1e-9);
}

TEST(PingPongTest, FitIgnoresSampleOrderAndRepeatedSizes) {
  expect_exact_fit({4096, 8, 4096, 1 << 20, 8, 64}, 3e-6, 2e-10);
}

TEST(PingPongTest, FitMinimisesSquaredRelativeError) {
  // Off the line, the fit must satisfy the normal equations of
  // sum(((alpha + beta*x - y) / y)^2): the weighted residuals r/y^2 sum to
  // zero, and so do x*r/y^2. Checked directly, without redoing the fit.
  const std::vector<PingPongSample> samples{
      {8, 2.1e-6}, {1000, 1.7e-6}, {50000, 9.0e-6}, {1 << 20, 1.9e-4}, {1 << 24, 2.2e-3}};
  DTW_TRACE("fit_alpha_beta of 5 noisy samples, 8 B to 16 MiB: the normal equations of the "
            "relative error");
  const AlphaBeta fit = fit_alpha_beta(samples);
  double g_alpha = 0, g_beta = 0, scale = 0;
  for (const PingPongSample& s : samples) {
    const double y = s.round_trip_seconds / 2, x = static_cast<double>(s.bytes);
    const double relative = (fit.seconds(s.bytes) - y) / y;
    g_alpha += relative / y;
    g_beta += relative * x / y;
    scale += x / y;
  }
  const char* rule =
      ": the fit must minimise the squared relative error sum(((alpha + beta x - y) / y)^2), "
      "least squares with weights 1/y^2 (y = round trip / 2), not 1 and not 1/y";
  EXPECT_NEAR(g_alpha * fit.alpha_seconds, 0, 1e-9) << "d/d alpha is not 0" << rule;
  EXPECT_NEAR(g_beta / scale, 0, 1e-9) << "d/d beta is not 0" << rule;
}

TEST(PingPongTest, FitGivesSmallMessagesTheirWeight) {
  // Round trips measured on a 2-core machine (threads backend). Fitting the
  // plain squared error lets the 64 MiB sample decide everything and gives a
  // negative alpha; the relative fit keeps alpha near the 8-byte one-way time.
  const std::vector<PingPongSample> samples{
      {8, 1.02e-6},          {64, 1.04e-6},         {512, 1.08e-6},       {4096, 1.39e-6},
      {32768, 2.78e-6},      {262144, 62.36e-6},    {1048576, 183.94e-6}, {4194304, 305.23e-6},
      {16777216, 1422.1e-6}, {67108864, 9632.37e-6}};
  DTW_TRACE("fit_alpha_beta of the chapter's measured table, 8 B to 64 MiB");
  const AlphaBeta fit = fit_alpha_beta(samples);
  const char* rule = ": every size must count alike (weights 1/y^2); an unweighted fit lets the "
                     "64 MiB sample decide and gives alpha = -53 us";
  EXPECT_GT(fit.alpha_seconds, 0.4e-6) << "alpha in seconds" << rule;
  EXPECT_LT(fit.alpha_seconds, 0.6e-6) << "alpha in seconds" << rule;
  EXPECT_GT(1 / fit.beta_seconds_per_byte, 5e9) << "bandwidth in bytes/s" << rule;
  EXPECT_LT(1 / fit.beta_seconds_per_byte, 50e9) << "bandwidth in bytes/s" << rule;
}

TEST(PingPongTest, FitStaysExactWhenSizesSitCloseTogether) {
  // Sizes near 16 GiB, 64 bytes apart: x^2 is about 3e20, and the textbook
  // denominator n*sum(x^2) - sum(x)^2 subtracts two such numbers to get about
  // 1e5, losing every digit. Subtracting the means first keeps beta to about
  // eight digits. (Alpha, 5 us under 100 s of beta*x, cannot be recovered by
  // any method this far from x = 0, so only beta is checked.)
  const std::int64_t base = std::int64_t{1} << 34;
  const double alpha = 5e-6, beta = 1.0 / 10e9;
  DTW_TRACE("fit_alpha_beta of exact samples at 4 sizes 64 B apart near 16 GiB, 1/beta 10 GB/s");
  const AlphaBeta fit =
      fit_alpha_beta(exact_samples({base, base + 64, base + 128, base + 192}, alpha, beta));
  EXPECT_NEAR(fit.beta_seconds_per_byte, beta, 1e-6 * beta)
      << "beta: subtract the weighted means before multiplying (sum of w (x - mean_x)^2), the "
         "textbook n sum(x^2) - sum(x)^2 cancels away every digit when the sizes sit close "
         "together";
}

TEST(PingPongArgumentsTest, FitRejectsFewerThanTwoDistinctSizes) {
  EXPECT_THROW(fit_alpha_beta({}), InvalidArgument);
  const std::vector<PingPongSample> one{{64, 1e-5}};
  EXPECT_THROW(fit_alpha_beta(one), InvalidArgument);
  const std::vector<PingPongSample> same{{64, 1e-5}, {64, 2e-5}, {64, 3e-5}};
  EXPECT_THROW(fit_alpha_beta(same), InvalidArgument);
}

TEST(PingPongArgumentsTest, FitRejectsTimesThatAreNotPositive) {
  const std::vector<PingPongSample> zero{{8, 1e-6}, {64, 0.0}};
  EXPECT_THROW(fit_alpha_beta(zero), InvalidArgument);
  const std::vector<PingPongSample> negative{{8, -1e-6}, {64, 1e-6}};
  EXPECT_THROW(fit_alpha_beta(negative), InvalidArgument);
}

TEST(PingPongTest, ReturnsOneSamplePerSizeOnPeerA) {
  const std::vector<std::int64_t> sizes{0, 1, 1000, 1 << 16};
  for (int p : {2, 3, 7, 16}) {
    // The pair (p-1, 0) puts the initiator on the last rank, so rank 0 is
    // not special; bystanders exist from p = 3 on.
    const int a = p - 1, b = 0;
    DTW_TRACE("ping_pong, p " << p << ", peer_a " << a << ", peer_b " << b << ", sizes 0, 1, 1000, 65536");
    launch_bounded(p, [&](Comm& comm) {
      const std::vector<PingPongSample> got = ping_pong(comm, sizes, 3, a, b);
      if (comm.rank() != a) {
        EXPECT_TRUE(got.empty()) << "p " << p << ", rank " << comm.rank() << " is not peer_a";
        return;
      }
      ASSERT_EQ(got.size(), sizes.size()) << "p " << p;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(got[i].bytes, sizes[i]) << "p " << p << ", sample " << i;
        EXPECT_GT(got[i].round_trip_seconds, 0) << "p " << p << ", sample " << i;
        EXPECT_LT(got[i].round_trip_seconds, 1.0) << "p " << p << ", sample " << i;
      }
    });
  }
}

TEST(PingPongTest, SendsWarmUpPlusRepeatsEachWayAndNothingElse) {
  const std::vector<std::int64_t> sizes{1, 100, 4096};
  const int repeats = 4, p = 3;
  DTW_TRACE("ping_pong traffic, p 3, peer_a 2, peer_b 1, sizes 1, 100, 4096, repeats 4");
  const Report report =
      launch_bounded(p, [&](Comm& comm) { ping_pong(comm, sizes, repeats, 2, 1); });
  const std::int64_t bytes = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  const std::int64_t messages = static_cast<std::int64_t>(sizes.size()) * (repeats + 1);
  // One untimed and `repeats` timed round trips per size, each way.
  const char* rule = ": per size, 1 untimed warm-up round trip and then `repeats` timed ones, "
                     "each one message there and one back";
  EXPECT_EQ(report.traffic.bytes(2, 1), bytes * (repeats + 1)) << "bytes 2->1" << rule;
  EXPECT_EQ(report.traffic.bytes(1, 2), bytes * (repeats + 1)) << "bytes 1->2" << rule;
  EXPECT_EQ(report.traffic.messages(2, 1), messages) << "messages 2->1" << rule;
  EXPECT_EQ(report.traffic.messages(1, 2), messages) << "messages 1->2" << rule;
  // Rank 0 is a bystander: it neither sends nor receives.
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(report.traffic.messages(0, r), 0) << "rank 0 sent to rank " << r;
    EXPECT_EQ(report.traffic.messages(r, 0), 0) << "rank " << r << " sent to rank 0";
  }
}

// A communicator of two ranks with nobody behind rank 1: every send and
// receive of this rank completes a scripted delay after it was posted (a
// receive arrives full), so the test knows how long each round trip took.
// Sleeping never returns early, so a round trip timed around both calls takes
// at least the two delays; scheduling only ever adds a little.
class ScriptedLinkComm final : public Comm {
 public:
  using Delay = std::function<std::chrono::microseconds(int call)>;  // call 0, 1, 2, ...
  explicit ScriptedLinkComm(Delay delay)
      : Comm(0, {0, 1}, std::make_shared<Traffic>(2),
             std::make_shared<Tracer>(0, false, std::chrono::steady_clock::now()), Exec::host()),
        delay_(std::move(delay)) {}
  const char* backend() const override { return "scripted"; }

 protected:
  struct State : detail::RequestState {
    std::chrono::steady_clock::time_point due;
  };
  std::shared_ptr<detail::RequestState> post(std::int64_t received) {
    auto state = std::make_shared<State>();
    state->due = std::chrono::steady_clock::now() + delay_(calls_++);
    state->received_count = received;
    return state;
  }
  std::shared_ptr<detail::RequestState> start_send(ConstBuffer, int, int, const char*) override {
    return post(0);
  }
  std::shared_ptr<detail::RequestState> start_recv(Buffer data, int, int, const char*) override {
    return post(data.count);
  }
  void complete(std::span<detail::RequestState* const> states, const char*) override {
    for (detail::RequestState* s : states) std::this_thread::sleep_until(static_cast<State*>(s)->due);
  }
  std::size_t complete_any(std::span<detail::RequestState* const> states, const char* op) override {
    complete(states.first(1), op);
    return 0;
  }
  bool poll(detail::RequestState* s, const char*) override {
    return std::chrono::steady_clock::now() >= static_cast<State*>(s)->due;
  }
  std::unique_ptr<Comm> make_dup(std::uint64_t, bool) override {
    throw NotImplemented("ScriptedLinkComm: no dup");
  }
  std::unique_ptr<Comm> make_subgroup(const std::vector<int>&, int, std::uint64_t) override {
    throw NotImplemented("ScriptedLinkComm: no split");
  }

 private:
  Delay delay_;
  int calls_ = 0;
};

TEST(PingPongTest, ReturnsTheFastestWholeRoundTripItTimed) {
  // peer_a on a scripted link. Each round trip is a send then a receive; the
  // warm-up's take no time at all, every timed one's take 3 ms each (6 ms a
  // round trip), except that repeat 2's send and the last repeat's receive take
  // 40 ms. So the fastest timed round trip is 6 ms: half of it, a clock started
  // after the send, a timed warm-up, a mean or the last repeat all miss.
  const int repeats = 5, calls_per_size = 2 * (repeats + 1);
  const auto ms = [](int n) { return std::chrono::microseconds(1000 * n); };
  ScriptedLinkComm comm([&](int call) {
    const int in_size = call % calls_per_size, round_trip = in_size / 2;
    const bool send = in_size % 2 == 0;
    if (round_trip == 0) return ms(0);
    if ((round_trip == 2 && send) || (round_trip == repeats && !send)) return ms(40);
    return ms(3);
  });
  const std::vector<std::int64_t> sizes{8, 4096};
  DTW_TRACE("ping_pong timing on a scripted link: send and receive 3 ms each, warm-up 0 ms, "
            "repeat 2 and the last repeat 40 ms slower");
  const std::vector<PingPongSample> got = ping_pong(comm, sizes, repeats);
  ASSERT_EQ(got.size(), sizes.size()) << "samples on peer_a";
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const double us = got[k].round_trip_seconds * 1e6;
    EXPECT_GE(us, 6000) << "size " << sizes[k] << " B: returned round trip " << us
                        << " us, but every timed round trip took at least 6000 us: start the "
                           "clock before the send and stop it after the echo has arrived, store "
                           "the whole round trip (not half of it), and do not time the warm-up";
    EXPECT_LE(us, 6000 + 4000) << "size " << sizes[k] << " B: returned round trip " << us
                               << " us, but the fastest timed round trip took about 6000 us: "
                                  "keep the fastest of the `repeats` timed round trips, not "
                                  "their mean or the last one";
  }
}

TEST(PingPongTest, LargerMessagesTakeLonger) {
  // 32 MiB takes milliseconds, 8 bytes microseconds. The fastest of 20 round
  // trips is kept, so the small one would have to be preempted 20 times in a
  // row to lose: robust even on a loaded machine.
  const std::vector<std::int64_t> sizes{8, 32 << 20};
  launch_bounded(2, [&](Comm& comm) {
    const std::vector<PingPongSample> got = ping_pong(comm, sizes, 20);
    if (comm.rank() != 0) return;
    ASSERT_EQ(got.size(), 2u);
    EXPECT_GT(got[1].round_trip_seconds, got[0].round_trip_seconds);
  });
}

TEST(PingPongTest, EmptySizeListGivesNoSamples) {
  launch_bounded(2, [](Comm& comm) {
    EXPECT_TRUE(ping_pong(comm, std::span<const std::int64_t>{}, 5).empty());
  });
}

TEST(PingPongArgumentsTest, RejectsBadArguments) {
  const std::vector<std::int64_t> sizes{8, 64};
  const std::vector<std::int64_t> negative{8, -1};
  auto run = [&](int p, std::span<const std::int64_t> s, int repeats, int a, int b) {
    launch_bounded(p, [&](Comm& comm) { ping_pong(comm, s, repeats, a, b); });
  };
  EXPECT_THROW(run(1, sizes, 3, 0, 1), InvalidArgument) << "a world of one rank has no pair";
  EXPECT_THROW(run(2, sizes, 3, 1, 1), InvalidArgument) << "peers must differ";
  EXPECT_THROW(run(2, sizes, 3, 0, 2), InvalidArgument) << "peer_b out of range";
  EXPECT_THROW(run(3, sizes, 3, -1, 0), InvalidArgument) << "peer_a out of range";
  EXPECT_THROW(run(2, negative, 3, 0, 1), InvalidArgument) << "negative size";
  EXPECT_THROW(run(2, sizes, 0, 0, 1), InvalidArgument) << "no repeats";
}

}  // namespace
}  // namespace dtw::ch00
