// Step 07.2: DeepSpeed-Ulysses. The all-to-all layouts put every head's
// tokens where they belong for batch > 1 (the field's bug was a reshape
// right only for batch 1); the core's forward and backward (out, lse, dq,
// dk, dv) equal single-device attention in double for every world and head
// count that divides, causal or not; a layer takes exactly 8 all-to-alls
// and 8·(p−1)/p·n elements per rank; heads that do not divide are refused.
#include <gtest/gtest.h>

#include <string>

#include "sp_test.h"

namespace dtw::ch07 {
namespace {

using testing::Kind;
using testing::Problem;

DTW_TEST_STEPS(UlyssesLayoutTest, "07.1", "07.2");
TEST(UlyssesLayoutTest, ToHeadsGathersEveryTokenOfTheLocalHeadsForEveryBatchRow) {
  const int p = 2;
  const std::int64_t B = 3, H = 4, t = 2, D = 1;
  DTW_TRACE("Ulysses layout, p 2, batch 3, heads 4, T 4");
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    const int r = comm.rank();
    // x[b, h, τ] = 1000·b + 100·h + the token's global position.
    std::vector<double> x;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < t; ++i) x.push_back(1000.0 * b + 100.0 * h + r * t + i);
    UlyssesAttention<double> core({.comm = &comm, .seq_len = p * t});
    const kernels::AttentionShape s{B, H, t, t, D};
    const std::vector<double> heads = core.to_heads(x.data(), s);
    ASSERT_EQ(heads.size(), x.size());
    std::size_t at = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = r * H / p; h < (r + 1) * H / p; ++h)
        for (std::int64_t i = 0; i < p * t; ++i, ++at) {
          const double want = 1000.0 * b + 100.0 * h + i, got = heads[at];
          if (got == want) continue;
          // The value names the sequence and the head it came from.
          const auto got_b = static_cast<std::int64_t>(got) / 1000;
          const auto got_h = static_cast<std::int64_t>(got) % 1000 / 100;
          std::string why;
          if (got_b != b)
            why = ": it holds sequence " + std::to_string(got_b) + "'s values, so batch rows and "
                  "heads are swapped -- with B > 1 the block for rank j is not one slice of x "
                  "(the reshape of deepspeedai/DeepSpeed#5808): copy each (b, h) row of the "
                  "heads rank j owns";
          else if (got_h != h)
            why = ": it holds head " + std::to_string(got_h) + "; rank j gets heads [j·H/p, "
                  "(j+1)·H/p), and rank i's block goes back to those heads";
          FAIL() << "rank " << r << ": head side [sequence " << b << ", head " << h
                 << ", position " << i << "]: expected " << want << ", got " << got << why;
        }
    std::vector<double> back(x.size());
    core.to_tokens(back.data(), heads, s);
    const std::string bad = dtw::testing::compare(r, x, back);
    if (!bad.empty())
      ADD_FAILURE() << bad << " of x [B, H, t, D] after to_tokens(to_heads(x)): the two "
                    << "layouts must be each other's inverse";
    EXPECT_EQ(core.tally().all_to_alls, 2)
        << "rank " << r << ": to_heads and to_tokens are one all-to-all each";
  });
}

DTW_TEST_STEPS(UlyssesTest, "07.1", "07.2");
TEST(UlyssesTest, ForwardAndBackwardEqualSingleDeviceAttention) {
  struct Case {
    int p;
    std::int64_t heads, batch;
    bool causal;
  };
  for (const Case c : {Case{1, 4, 1, true}, Case{2, 4, 3, true}, Case{2, 8, 1, false},
                       Case{4, 4, 3, false}, Case{4, 8, 3, true}, Case{8, 8, 1, true}}) {
    const Problem pr{.batch = c.batch, .heads = c.heads, .seq = 16, .head_dim = 4,
                     .causal = c.causal};
    DTW_TRACE("Ulysses attention, " << pr.describe(c.p));
    testing::run_core<double>(Kind::kUlysses, pr, c.p, 1e-12);
  }
}

TEST(UlyssesTest, ALayerIsEightAllToAllsOfSevenEighthsOfNOnEightRanks) {
  // 8 ranks on threads, 2 and 4 on the twin's processes too.
  for (int p : {2, 4, 8}) {
    const Problem pr{.batch = 2, .heads = 8, .seq = 16, .head_dim = 4};
    DTW_TRACE("Ulysses traffic, " << pr.describe(p));
    const Report report = testing::run_core<double>(
        Kind::kUlysses, pr, p, 1e-12, [](int r, const Tally& t) {
          EXPECT_EQ(t.all_to_alls, 8) << "rank " << r << " counted these all-to-alls; a layer "
                                      << "makes 8: q, k, v, out forward; dout, dq, dk, dv backward";
        });
    if (!testing::no_rank_failed(report)) return;
    const std::int64_t n = pr.batch * pr.heads * (pr.seq / p) * pr.head_dim;
    for (int r = 0; r < p; ++r)  // 8 all-to-alls, each sending p−1 of its p blocks of n/p
      EXPECT_EQ(testing::bytes_sent(report, r),
                8 * (p - 1) * (n / p) * static_cast<std::int64_t>(sizeof(double)))
          << "rank " << r << " sent these bytes; a layer sends 8·(p−1)/p·n elements (8 "
          << "all-to-alls, each keeping 1/p of n and sending the rest)";
  }
}

// Ulysses does not care how the tokens are cut: the head side sees them all,
// rank 0's runs, then rank 1's, ... -- on a zig-zag split not 0..T−1 in order,
// which only a causal mask on non-contiguous runs tells apart. The runs come
// from the model's shard, so this is 07.2's test, not 07.4's.
DTW_TEST_STEPS(UlyssesZigZagTest, "07.2");
TEST(UlyssesZigZagTest, ZigZagShardsWorkTooTheHeadSideSeesEveryRanksRuns) {
  for (const int p : {2, 4})
    for (const bool causal : {true, false}) {
      const Problem pr{.batch = 2, .heads = 4, .seq = 16, .head_dim = 4, .causal = causal,
                       .split = SequenceSplit::kZigZag, .model_runs = true};
      DTW_TRACE("Ulysses attention on zig-zag runs (the head side's positions are every rank's "
                "runs in rank order, not 0..T-1), "
                << pr.describe(p));
      testing::run_core<double>(Kind::kUlysses, pr, p, 1e-12);
    }
}

DTW_TEST_STEPS(UlyssesArgumentsTest);  // refused before any lab code runs
TEST(UlyssesArgumentsTest, HeadsThatDoNotSplitAreAClearError) {
  const Problem pr{.batch = 1, .heads = 4, .seq = 12, .head_dim = 2};
  const Report report = dtw::testing::launch_collecting_bounded(3, {}, [&](Comm& comm) {
    UlyssesAttention<double> core({.comm = &comm, .seq_len = pr.seq});
    std::vector<double> x(static_cast<std::size_t>(4 * 4 * 2));
    model::CoreCache<double> cache;
    const TokenRuns pos{{{4 * comm.rank(), 4 * comm.rank() + 4}}};
    core.forward(x.data(), cache, x.data(), x.data(), x.data(), {1, 4, 4, 4, 2}, pos, 0);
  });
  ASSERT_EQ(report.errors.size(), 3u);
  for (const RankError& e : report.errors) {
    EXPECT_NE(e.message.find("4 heads do not split over 3 ranks"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("rank " + std::to_string(e.rank)), std::string::npos) << e.message;
  }
}

TEST(UlyssesArgumentsTest, MoreRanksThanHeadsIsAClearErrorBeforeTraining) {
  testing::expect_error(
      [] { check_sp_run(testing::tiny(32), 8, Method::kUlysses, -1); },
      {"sp-ulysses", "8 ranks exceed the 4 heads"});
  testing::expect_error(
      [] { train::run_ranks<double>(testing::tiny(32), testing::on(8), sp_ulysses<double>); },
      {"sp-ulysses on rank", "8 ranks exceed the 4 heads"});
}

}  // namespace
}  // namespace dtw::ch07
