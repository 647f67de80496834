// Steps 07.3 and 07.4: ring attention. Forward and backward (out, lse, dq,
// dk, dv) equal single-device attention in double on 1-8 ranks, causal or
// not, batch 1 and 3, 4 and 8 heads; every message of the forward travels
// while a block is attended to; a layer takes p−1 hops forward and 2p−1
// backward (none at p = 1), with exactly the formula's bytes per rank. With zig-zag shards
// every rank computes the same number of query-key pairs; contiguous shards
// give the formula's max/min ratio, and causal_work predicts both tables.
#include <gtest/gtest.h>

#include <algorithm>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::Kind;
using testing::Problem;

struct Case {
  int p;
  std::int64_t heads, batch;
  bool causal;
};

DTW_TEST_STEPS(RingTest, "07.1", "07.3");
TEST(RingTest, ForwardAndBackwardEqualSingleDeviceAttention) {
  for (const Case c : {Case{1, 4, 1, true}, Case{2, 4, 3, true}, Case{3, 8, 1, false},
                       Case{4, 4, 3, true}, Case{4, 8, 1, false}, Case{8, 4, 1, true}}) {
    const Problem pr{.batch = c.batch, .heads = c.heads, .seq = c.p == 8 ? 32 : 24,
                     .head_dim = 4, .causal = c.causal};
    DTW_TRACE("ring attention, " << pr.describe(c.p));
    testing::run_core<double>(Kind::kRing, pr, c.p, 1e-12);
  }
}

TEST(RingTest, EachHopsMessagesTravelWhileTheBlockInHandIsAttendedTo) {
  // The work clock of every rank's trace is its tally's pairs: a message
  // posted before a block is attended to and waited for after it ends with
  // more pairs than it started with. Not causal: every block has pairs.
  for (int p : {2, 4}) {
    const Problem pr{.batch = 1, .heads = 2, .seq = 16, .head_dim = 2, .causal = false};
    DTW_TRACE("ring forward overlap, " << pr.describe(p));
    LaunchOptions options;
    options.timeout = std::chrono::seconds(20);
    options.trace = true;
    const testing::Whole w = testing::oracle(pr);
    const Report report = dtw::testing::launch_bounded(p, options, [&](Comm& comm) {
      const TokenRuns pos = sequence_runs(comm.rank(), p, pr.split, pr.seq);
      const kernels::AttentionShape s{pr.batch, pr.heads, pos.size(), pos.size(), pr.head_dim};
      const auto q = testing::cut<double>(w.q, pr, pos, pr.head_dim),
                 k = testing::cut<double>(w.k, pr, pos, pr.head_dim),
                 v = testing::cut<double>(w.v, pr, pos, pr.head_dim);
      std::vector<double> out(q.size());
      model::CoreCache<double> cache;
      RingAttention<double> core({.comm = &comm, .seq_len = pr.seq, .causal = false});
      comm.tracer().set_work_clock([&core] { return static_cast<double>(core.tally().pairs); },
                                   &core);
      core.forward(out.data(), cache, q.data(), k.data(), v.data(), s, pos, 0);
      comm.tracer().clear_work_clock(&core);
    });
    if (!testing::no_rank_failed(report)) return;
    std::int64_t checked = 0;
    for (const TraceEvent& e : report.trace) {
      if (e.category != "comm" || e.work_start < 0) continue;
      ++checked;
      if (e.work_end > e.work_start) continue;
      ADD_FAILURE() << "rank " << e.rank << "'s " << e.name << (e.is_send ? " to" : " from")
                    << " rank " << e.peer << " (tag " << e.tag << ") started and completed "
                    << "with no block attended to in between (" << e.work_start
                    << " query-key pairs computed at both ends). The rule: post the next "
                    << "hop's isend and irecv before attending to the block in hand, and wait "
                    << "after; waiting first serialises the ring";
      break;
    }
    EXPECT_GT(checked, 0) << "no message of the ring's forward was traced";
  }
}

TEST(RingTest, ALayerIsPMinusOneHopsForwardAndTwoPMinusOneBackward) {
  for (int p : {1, 2, 3, 4}) {
    const Problem pr{.batch = 2, .heads = 4, .seq = 24, .head_dim = 4};
    DTW_TRACE("ring traffic, " << pr.describe(p));
    // p > 1: p−1 K/V hops forward; p−1 K/V hops and p [dK; dV] hops backward. p = 1: no ring.
    const std::int64_t hops = p == 1 ? 0 : 3 * p - 2;
    const Report report = testing::run_core<double>(
        Kind::kRing, pr, p, 1e-12, [hops](int r, const Tally& t) {
          EXPECT_EQ(t.ring_hops, hops)
              << "rank " << r << " counted these ring messages; a layer sends p−1 K/V blocks "
              << "forward, p−1 K/V blocks and p [dK; dV] sums backward, and nothing at p = 1";
        });
    if (!testing::no_rank_failed(report)) return;
    // n elements per tensor; forward 2(p−1)n (K, V), backward 2(p−1)n + 2pn (K, V; dK, dV).
    const std::int64_t n = pr.batch * pr.heads * (pr.seq / p) * pr.head_dim;
    const std::int64_t want = hops * 2 * n * 8;
    for (int r = 0; r < p; ++r) {
      const int right = (r + 1) % p;
      if (p > 1 && report.traffic.messages(r, right) != hops) continue;  // run_core said so
      EXPECT_EQ(testing::bytes_sent(report, r), want)
          << "rank " << r << " sent these bytes; a layer sends 2n elements per ring message, "
          << hops << " messages (none at p = 1)";
      for (int d = 0; d < p; ++d)  // the ring: only to the next rank
        if (d != right) {
          EXPECT_EQ(report.traffic.bytes(r, d), 0)
              << "rank " << r << " sent to rank " << d << ": the ring talks to rank r+1 only";
        }
    }
  }
}

TEST(RingTest, HoldsTwoKVBlocksAndThreeGradientBuffersAtMost) {
  // The ledger's communication buffers: 2 K/V blocks of 2n forward; in the
  // backward 2 K/V blocks and 3 [dK; dV] buffers: 10n. Never the whole T.
  for (int p : {2, 4}) {
    const Problem pr{.batch = 2, .heads = 4, .seq = 32, .head_dim = 4};
    DTW_TRACE("ring memory, " << pr.describe(p));
    const Report report = testing::run_core<double>(Kind::kRing, pr, p, 1e-12);
    if (!testing::no_rank_failed(report)) return;
    const std::int64_t n = pr.batch * pr.heads * (pr.seq / p) * pr.head_dim;
    for (int r = 0; r < p; ++r) {
      const std::int64_t peak =
          report.memory[static_cast<std::size_t>(r)].peak_of(MemoryCategory::kCommBuffers);
      EXPECT_LE(peak, 10 * n * 8)
          << "rank " << r << "'s peak of communication buffers; the ring holds at most two "
          << "K/V blocks and three [dK; dV] buffers of 2n elements each (10n), never the whole T";
      EXPECT_GE(peak, 4 * n * 8) << "rank " << r << ": the forward's two K/V blocks (4n) "
                                 << "are communication buffers on the ledger, and so are "
                                 << "the backward's";
    }
  }
}

TEST(RingTest, InFloat32TheErrorStaysWithinAFewEpsilonOnOneToEightRanks) {
  // Each hop's merge adds about one rounding (2^-24) per row; the blocks' own
  // float32 sums add more. Up to p = 8 it all stays below 2e-5 relative.
  for (int p : {1, 2, 4, 8}) {
    const Problem pr{.batch = 1, .heads = 4, .seq = 64, .head_dim = 8};
    DTW_TRACE("ring attention in float32, " << pr.describe(p));
    testing::run_core<float>(Kind::kRing, pr, p, 2e-5);
  }
}

DTW_TEST_STEPS(RingZigZagTest, "07.1", "07.3", "07.4");
TEST(RingZigZagTest, ForwardAndBackwardEqualSingleDeviceAttention) {
  for (const Case c : {Case{1, 4, 1, true}, Case{2, 8, 3, true}, Case{3, 4, 1, true},
                       Case{4, 4, 3, false}, Case{8, 8, 1, true}}) {
    const Problem pr{.batch = c.batch, .heads = c.heads, .seq = c.p == 3 ? 24 : 32,
                     .head_dim = 4, .causal = c.causal, .split = SequenceSplit::kZigZag};
    DTW_TRACE("ring attention, " << pr.describe(c.p));
    testing::run_core<double>(Kind::kRing, pr, c.p, 1e-12);
  }
}

TEST(RingZigZagTest, ZigZagMakesTheCausalWorkEqualAndTheTablePredictsIt) {
  for (auto split : {SequenceSplit::kContiguous, SequenceSplit::kZigZag})
    for (int p : {2, 4}) {
      const Problem pr{.batch = 1, .heads = 2, .seq = 32, .head_dim = 2, .split = split};
      DTW_TRACE("ring work table, " << pr.describe(p));
      // Every rank records its pairs; each compares with its closed form.
      testing::run_core<double>(Kind::kRing, pr, p, 1e-12, [&](int r, const Tally& t) {
        EXPECT_EQ(t.pairs, pr.batch * pr.heads * causal_work(r, p, split, pr.seq))
            << "rank " << r << " of " << p << ": the pairs its ring computed (tally) against "
            << "B·H·causal_work, the closed form";
      });
      const std::int64_t first = causal_work(0, p, split, pr.seq);
      const std::int64_t last = causal_work(p - 1, p, split, pr.seq);
      if (split == SequenceSplit::kZigZag) {
        EXPECT_EQ(first, last) << "zig-zag: the first and the last rank's work should be equal";
      } else {
        const std::int64_t C = pr.seq / p;  // max/min = ((2p−1)C + 1)/(C + 1)
        EXPECT_EQ(last * (C + 1), first * ((2 * p - 1) * C + 1))
            << "contiguous: rank p−1's work " << last << " should be ((2p−1)C + 1)/(C + 1) "
            << "times rank 0's " << first << " (C = T/p = " << C << ")";
      }
    }
}

}  // namespace
}  // namespace dtw::ch07
