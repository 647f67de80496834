// Step 04.1, ZeRO-1: the run matches the single-device reference in double
// on 1-5 ranks (5: the batch of 12 rows splits unevenly, and every unit into
// uneven chunks), for the GPT and the MLP, with and without micro-batches;
// the ledger's peaks are the formula exactly; the traffic matrix is the ring's;
// and the end of a step keeps its two rules: one clipping factor from the
// whole gradient's norm, and the allgather after the optimizer step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dtw/train/reference.h"
#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::on;
using testing::tiny;

DTW_TEST_STEPS(Zero1Test, "04.1");
TEST(Zero1Test, OnlyTheOptimizerStateIsSharded) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    const train::RunSpec spec = tiny(model, 1);
    const int p = 4;
    DTW_TRACE("zero1 memory: optimizer state for this rank's shards only, " << model << " on "
                                                                           << p << " ranks");
    const train::RunOutcome out = testing::run_stage(1, spec, on(p));
    const std::int64_t psi = static_cast<std::int64_t>(testing::units_of(spec).back().end);
    for (int r = 0; r < p; ++r) {
      const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
      EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), 8 * psi) << model << " rank " << r;
      EXPECT_EQ(m.peak_of(MemoryCategory::kGradients), 8 * psi) << model << " rank " << r;
      // AdamW's two moments, for this rank's chunks of every unit only.
      EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), 2 * 8 * testing::owned(spec, p, r))
          << model << " rank " << r
          << ": ZeRO-1 keeps Adam's moments for this rank's shards only (the plan's optimizer "
             "ranges are Sharding::owned(r)); moments for the whole model is DDP's memory";
      EXPECT_EQ(m.peak_of(MemoryCategory::kCommBuffers), 0) << model << " rank " << r;
    }
  }
}

// The gradient is cut over the ranks, so clipping needs the norm of the whole
// of it: Σ g² summed over the ranks. A rank that clips by its own shards'
// norm scales its piece by a factor of its own. AdamW hides that (its step
// barely depends on the gradient's scale), so this run takes one step of SGD
// without momentum or warm-up, whose step is the clipped gradient itself,
// with a clip far below the gradient's norm. Only each rank's own shards are
// compared: they are what its clip and step wrote (the allgather is the next
// test's). A step that is the right one times a factor is a wrong clip;
// anything else is a wrong gradient.
TEST(Zero1Test, EveryRankClipsByTheGlobalNorm) {
  train::RunSpec spec = tiny("gpt-tiny", 1);
  spec.optimizer = model::Optimizer::kSgd;
  spec.sgd.momentum = 0;
  spec.warmup_steps = 0;
  spec.clip_norm = 0.01;
  const int p = 3;
  train::HarnessOptions o = on(p);
  o.compare = false;
  DTW_TRACE("zero1, one step of sgd clipped at 0.01: each rank's own shards after its clip and "
            "step, gpt-tiny on 3 ranks");
  const std::vector<double>& before = *train::reference_params<double>(spec, 0);
  const std::vector<double>& after = *train::reference_params<double>(spec, 1);
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    zero1(run);
    const int r = run.comm().rank();
    // This rank's step d and the reference's d_ref over its own shards; the
    // factor f that best fits d = f·d_ref, and how far d is from f·d_ref.
    std::vector<std::int64_t> where;
    std::vector<double> d, d_ref;
    for (const auto& [begin, values] : run.reported()) {
      const std::int64_t end = begin + static_cast<std::int64_t>(values.size());
      for (const train::Range& mine : testing::owned_ranges(spec, p, r)) {
        for (std::int64_t i = std::max(begin, mine.begin); i < std::min(end, mine.end); ++i) {
          const std::size_t k = static_cast<std::size_t>(i);
          where.push_back(i);
          d.push_back(values[static_cast<std::size_t>(i - begin)] - before[k]);
          d_ref.push_back(after[k] - before[k]);
        }
      }
    }
    double dot = 0, norm2 = 0, scale = 0;
    for (std::size_t j = 0; j < d.size(); ++j) {
      dot += d[j] * d_ref[j];
      norm2 += d_ref[j] * d_ref[j];
      scale = std::max(scale, std::abs(d_ref[j]));
    }
    ASSERT_GT(norm2, 0) << "rank " << r << ": no element of its shards moved in the reference";
    const double f = dot / norm2;
    std::size_t worst = 0;  // the element furthest from the reference's step
    double worst_error = -1, fit_error = 0;
    for (std::size_t j = 0; j < d.size(); ++j) {
      fit_error = std::max(fit_error, std::abs(d[j] - f * d_ref[j]));
      if (std::abs(d[j] - d_ref[j]) > worst_error) worst_error = std::abs(d[j] - d_ref[j]), worst = j;
    }
    if (worst_error <= 1e-6 * scale) return;  // the single-device step, to rounding
    const std::size_t k = static_cast<std::size_t>(where[worst]);
    if (fit_error <= 1e-6 * scale)
      ADD_FAILURE() << "rank " << r << " stepped its shards by " << f
                    << " times the single-device step, every element alike: its clipping factor "
                       "is not the global one. Clip every rank by the norm of the WHOLE gradient: "
                       "the sum of squares summed over the ranks (the allreduce's second value), "
                       "not this rank's own";
    else
      ADD_FAILURE() << "rank " << r << "'s shards after one step are not the single-device step "
                    << "(element " << where[worst] << ": expected " << after[k] << ", got "
                    << before[k] + d[worst]
                    << "), and not by one factor, so not the clip: the gradient its chunk "
                       "received is wrong. Check the reduce-scatter (a sum of every rank's "
                       "gradient into this rank's chunk) and the shard offsets";
  });
}

// After the optimizer step each rank has fresh values only in its own chunks;
// the allgather spreads them. Before the step (or never) it spreads the old
// values, and the ranks end up holding different models.
TEST(Zero1Test, AfterTheStepEveryRankHoldsEveryRanksSteppedChunk) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const int p = 3;
  train::HarnessOptions o = on(p);
  o.compare = false;
  DTW_TRACE("zero1 allgather: after the optimizer step every rank holds every rank's stepped "
            "chunk (the allgather comes after the step, never before), gpt-tiny on 3 ranks");
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    zero1(run);
    Comm& comm = run.comm();
    const int r = comm.rank();
    const std::int64_t psi = testing::units_of(spec).back().end;
    std::vector<double> mine(static_cast<std::size_t>(psi), std::numeric_limits<double>::quiet_NaN());
    for (const auto& [begin, values] : run.reported())
      std::copy(values.begin(), values.end(), mine.begin() + begin);
    std::vector<double> all(static_cast<std::size_t>(psi * p));
    comm.reference_allgather(as_buffer(std::span<const double>(mine)), as_buffer(std::span<double>(all)));
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      for (const train::Range& theirs : testing::owned_ranges(spec, p, q)) {
        for (std::int64_t i = theirs.begin; i < theirs.end; ++i) {
          const double stepped = all[static_cast<std::size_t>(q * psi + i)];
          const double held = mine[static_cast<std::size_t>(i)];
          if (held == stepped) continue;
          ADD_FAILURE() << "rank " << r << " holds " << held << " at element " << i << ", in rank "
                        << q << "'s shard [" << theirs.begin << ", " << theirs.end << "); rank " << q
                        << " stepped it to " << stepped
                        << ": allgather the parameters AFTER the optimizer step, so every rank "
                           "gets every rank's stepped chunk (an allgather before the step, or "
                           "none, leaves the old values)";
          return;
        }
      }
    }
  });
}

TEST(Zero1Test, MatchesTheReferenceOnOneToFiveRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p = 1; p <= 5; ++p) {
      const train::RunSpec spec = tiny(model);
      DTW_TRACE("zero1, " << ::dtw::testing::describe_run(spec, p));
      const train::RunOutcome out = testing::run_stage(1, spec, on(p));
      EXPECT_TRUE(out.matches) << testing::where(spec, p) << ": " << out.mismatch;
      EXPECT_EQ(out.losses.size(), 3u) << testing::where(spec, p);
    }
  }
}

TEST(Zero1Test, MicroBatchesAccumulateBeforeTheReduceScatter) {
  // 12 rows over 3 ranks x 2 micro-batches: six shards of two rows.
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const train::RunOutcome out = testing::run_stage(1, spec, on(3, {"micro_batches=2"}));
  EXPECT_TRUE(out.matches) << out.mismatch;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(testing::bytes_sent(out.report, r), 2 * testing::bytes_per_step(spec, 1, 3, r))
        << "rank " << r << ": one reduce-scatter per step, whatever m";
}

TEST(Zero1Test, SendsTheRingsBytesExactly) {
  // A reduce-scatter and an allgather per unit: DDP's 2Ψ(p−1)/p, counted
  // chunk by chunk (uneven chunks on 3 and 5 ranks).
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p : {2, 3, 5}) {
      const train::RunSpec spec = tiny(model, 1);
      const train::RunOutcome out = testing::run_stage(1, spec, on(p));
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(testing::bytes_sent(out.report, r), testing::bytes_per_step(spec, 1, p, r))
            << testing::where(spec, p) << ", rank " << r;
    }
  }
}

}  // namespace
}  // namespace dtw::ch04
