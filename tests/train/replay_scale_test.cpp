// The modeled fabric at scale: replaying a trace must cost work in proportion
// to its events, whatever the world size. The test counts the replay's work
// (an internal counter of train/src/fabric.cpp, replay_looks()), so it needs
// no clock: a replay that looked at a collective's earlier rounds for each
// round did some k²/2 looks per rank and collective of k rounds, p³ in a ring
// all-reduce of p ranks; one that swept every rank until none moved did p
// visits per hop of a chain.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dtw/train/fabric.h"
#include "replay_work.h"

namespace dtw::train {
namespace {

constexpr int kRanks = 256;
constexpr std::int64_t kBytes = 4096;

// `steps` steps of P ranks: a compute phase of 1e6 FLOPs, then a ring
// all-reduce (collective channel 0, tag = the step) of 2(P−1) rounds, each a
// send to the right and a receive from the left, the first P−1 receives
// reducing. The host's times vary by rank and round; each round is posted when
// the one before it has ended.
std::vector<TraceEvent> ring_allreduce_trace(int p, int steps) {
  std::vector<TraceEvent> trace;
  for (int r = 0; r < p; ++r) {
    double t = 0;
    for (int s = 0; s < steps; ++s) {
      TraceEvent c{"compute", "compute", r, -1, 0, 0, t, t + 50 + r % 11};
      c.flops = 1e6;
      trace.push_back(c);
      t = c.end_us + 1;
      for (int k = 0; k < 2 * (p - 1); ++k) {
        const double end = t + 5 + (r * 131 + k * 17) % 7;
        TraceEvent send{"isend", "comm", r, (r + 1) % p, kBytes, s, t, end};
        send.is_send = true;
        send.channel = 0;
        TraceEvent recv{k < p - 1 ? "recv_reduce" : "irecv", "comm", r, (r + p - 1) % p, kBytes,
                        s, t, end};
        recv.channel = 0;
        trace.push_back(send);
        trace.push_back(recv);
        t = end;
      }
    }
  }
  return trace;
}

TEST(ReplayScaleTest, ARingAllReduceOfManyRanksCostsWorkInProportionToItsEvents) {
  constexpr int kSteps = 2;
  const std::vector<TraceEvent> trace = ring_allreduce_trace(kRanks, kSteps);
  // α 1 ms, β 1 ns/byte, 1 GFLOP/s, 1 GB/s, every rank on one node.
  Cluster c;
  c.name = "toy";
  c.ranks_per_node = kRanks;
  c.intra = c.inter = {1e-3, 1e-9};
  c.flops = 1e9;
  c.memory_bw = 1e9;
  const std::int64_t before = replay_looks();
  const Replay r = replay_on(trace, kRanks, c);
  const std::int64_t looks = replay_looks() - before;
  const auto events = static_cast<std::int64_t>(trace.size());  // some 260,000
  // Each message is placed once and completed a few times (its own wait, its
  // rank's later round, its partner), and a rank or lane is visited again
  // only when what it waits for has happened. The replay that looked at every
  // earlier round for each round, and at every event for each rank, made some
  // 520 million looks here.
  EXPECT_LE(looks, 8 * events) << "replay work for " << events << " events";
  EXPECT_GE(looks, events);  // the counter counts
  // Every rank is alike, so each step takes its compute (1 ms), 2(P−1) rounds
  // of α + nβ, and P−1 reductions of 3n bytes at memory speed.
  const double step = 1e-3 + 2 * (kRanks - 1) * (1e-3 + kBytes * 1e-9) +
                      (kRanks - 1) * 3 * kBytes / 1e9;
  EXPECT_NEAR(r.seconds, kSteps * step, 1e-9 * kSteps * step);
  EXPECT_EQ(r.unmatched, 0);
  EXPECT_EQ(r.events.size(), trace.size());
}

TEST(ReplayScaleTest, AChainAgainstTheRankOrderCostsWorkInProportionToItsEvents) {
  // Rank P−1 computes 1e6 FLOPs, then each rank r passes n bytes to r − 1 once
  // its own have arrived. A replay that swept every rank until none moved
  // would move one hop per sweep: some P² = 16 million visits here.
  constexpr int kChain = 4096;
  std::vector<TraceEvent> trace;
  TraceEvent c{"compute", "compute", kChain - 1, -1, 0, 0, 0, 10};
  c.flops = 1e6;
  trace.push_back(c);
  for (int r = kChain - 1; r > 0; --r) {
    const double t = 10 + 2 * (kChain - 1 - r);
    TraceEvent send{"send", "comm", r, r - 1, kBytes, 0, t, t + 2};
    send.is_send = true;
    trace.push_back(send);
    trace.push_back({"recv", "comm", r - 1, r, kBytes, 0, 0, t + 2});
  }
  Cluster toy;
  toy.name = "toy";
  toy.ranks_per_node = kChain;
  toy.intra = toy.inter = {1e-3, 1e-9};
  toy.flops = 1e9;
  toy.memory_bw = 1e9;
  const std::int64_t before = replay_looks();
  const Replay r = replay_on(trace, kChain, toy);
  const std::int64_t looks = replay_looks() - before;
  const auto events = static_cast<std::int64_t>(trace.size());
  EXPECT_LE(looks, 8 * events) << "replay work for " << events << " events";
  const double expected = 1e-3 + (kChain - 1) * (1e-3 + kBytes * 1e-9);
  EXPECT_NEAR(r.seconds, expected, 1e-9 * expected);
  EXPECT_EQ(r.unmatched, 0);
}

}  // namespace
}  // namespace dtw::train
