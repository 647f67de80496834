// Step 04.3, ZeRO-3 / FSDP: one unit gathered alone is the whole unit and
// lives until its last release; the run matches the reference on 1-5 ranks for both
// models, with micro-batches too; the ledger's parameter peak is the shard
// plus the units held whole, exactly; 3Ψ(p−1)/p-ish bytes, counted chunk by
// chunk; and a rank that runs a layer once more is named with the layer.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::on;
using testing::tiny;

DTW_TEST_STEPS(Zero3Test, "04.1", "04.2", "04.3");
// The gather on its own, before any training: one unit gathered on 3 ranks
// must equal the whole model's unit element for element, and a wrong element
// is named with the chunk it lies in and the chunk its value came from (a
// rank's shard copied to chunk 0, or never copied). Two params() calls hold
// it twice: it lives until the second release.
TEST(Zero3Test, GathersAUnitWholeAndFreesItAtTheLastRelease) {
  DTW_TRACE("zero3 gather: one unit of gpt-tiny gathered whole on 3 ranks, held twice, released twice");
  dtw::testing::launch_bounded(3, [](Comm& comm) {
    const train::RunSpec spec = tiny("gpt-tiny", 1);
    const int r = comm.rank(), p = comm.size();
    const Sharding sharding = Sharding::of(spec, p);
    train::Replica<double> replica(spec, comm.exec(),
                                   train::ReplicaPlan::ranges(testing::owned_ranges(spec, p, r)));
    train::Replica<double> whole(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    GatheredParams<double> params(comm, sharding, replica);
    const model::Unit& u = sharding.units()[2];
    const Chunks chunks(u.size(), p);
    const auto chunk_of = [&](std::int64_t i) {
      int c = 0;
      while (c + 1 < p && chunks.offset(c + 1) <= i) ++c;
      return c;
    };
    const double* got = params.params(2);
    const double* again = params.params(2);  // nested: the same copy
    EXPECT_EQ(got, again) << "rank " << r << ": a second params() of a unit already held must "
                             "return the same copy, not gather again";
    const std::span<double> expected = whole.params(u.begin, u.end);
    for (std::int64_t i = 0; i < u.size(); ++i) {
      if (got[i] == expected[static_cast<std::size_t>(i)]) continue;
      const auto from = std::find(expected.begin(), expected.end(), got[i]);
      const int c = chunk_of(i);
      std::ostringstream came;
      if (got[i] == 0)
        came << " (never written?)";
      else if (from != expected.end())
        came << ", which is element " << (from - expected.begin()) << "'s value (rank "
             << chunk_of(from - expected.begin()) << "'s chunk)";
      FAIL() << "rank " << r << ": element " << i << " of the gathered " << u.name << " holds "
             << got[i] << came.str() << "; expected " << expected[static_cast<std::size_t>(i)]
             << ". It lies in chunk " << c << " [" << chunks.offset(c) << ", "
             << chunks.offset(c) + chunks.size(c) << "), rank " << c
             << "'s: each rank copies its own shard into its own chunk of the unit (chunk r, "
                "Sharding's chunks of the unit), and the allgather fills the others";
    }
    params.release(2);
    EXPECT_EQ(params.live_units(), 1)
        << "rank " << r << ": the unit was taken twice and released once, so it is still held: "
           "count the holders (one per params() call) and free the copy only at the LAST release";
    params.release(2);
    EXPECT_EQ(params.live_units(), 0)
        << "rank " << r << ": every holder released the unit, so its copy must be freed";
  });
}

TEST(Zero3Test, HoldsTheShardPlusTheUnitsInFlight) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p : {2, 3, 5}) {
      const train::RunSpec spec = tiny(model, 1);
      DTW_TRACE("zero3 memory: the parameter shard plus the units held whole, " << model << " on "
                                                                                << p << " ranks");
      const train::RunOutcome out = testing::run_stage(3, spec, on(p));
      for (int r = 0; r < p; ++r) {
        const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
        const std::int64_t shard = testing::owned(spec, p, r);
        const std::string at = testing::where(spec, p) + ", rank " + std::to_string(r);
        EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), 8 * (shard + testing::gathered_peak(spec)))
            << at << ": the shard plus the units held whole (one unit, and the embedding the "
                     "tied head borrows); a unit's copy must be freed at its last release, and "
                     "gathered again when the backward asks for it";
        EXPECT_EQ(m.peak_of(MemoryCategory::kGradients),
                  8 * (shard + testing::gradient_buffers_peak(spec)))
            << at;
        EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), 2 * 8 * shard) << at;
      }
    }
  }
}

TEST(Zero3Test, MatchesTheReferenceOnOneToFiveRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p = 1; p <= 5; ++p) {
      const train::RunSpec spec = tiny(model);
      DTW_TRACE("zero3, " << ::dtw::testing::describe_run(spec, p));
      const train::RunOutcome out = testing::run_stage(3, spec, on(p));
      EXPECT_TRUE(out.matches) << testing::where(spec, p) << ": " << out.mismatch;
      EXPECT_EQ(out.losses.size(), 3u) << testing::where(spec, p);
      // Each rank reported its own chunks only: together, the model once.
      EXPECT_EQ(out.compared, testing::units_of(spec).back().end) << testing::where(spec, p);
    }
  }
}

TEST(Zero3Test, MicroBatchesGatherEveryPass) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const train::RunOutcome out = testing::run_stage(3, spec, on(3, {"micro_batches=2"}));
  EXPECT_TRUE(out.matches) << out.mismatch;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(testing::bytes_sent(out.report, r), 2 * testing::bytes_per_step(spec, 3, 3, r, 2))
        << "rank " << r;
}

TEST(Zero3Test, RunsOnASubGroupOfTheWorld) {
  // A world of 3 split into {0, 1} and {2}: each group shards the model and
  // the batch (2 micro-batches per rank) among its own ranks and trains the
  // whole batch, so every rank matches the reference, and the model is
  // reported once per group. Sharding or reducing over the world instead
  // would not pair up, or would give 1/3 shards.
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  DTW_TRACE("zero3 on groups {0, 1} and {2}, " << ::dtw::testing::describe_run(spec, 3));
  const train::RunOutcome out = train::run_ranks<double>(
      spec, on(3, {"micro_batches=2"}), [](train::RankRun<double>& run) {
        const int r = run.comm().rank();
        const std::unique_ptr<Comm> group = run.comm().split(r < 2 ? 0 : 1, r);
        train_zero(run, *group, ZeroOptions::from_knobs(run.knobs(), 3));
      });
  EXPECT_TRUE(out.matches) << out.mismatch;
  EXPECT_EQ(out.compared, 2 * testing::units_of(spec).back().end);
  for (const train::RankOutcome& r : out.ranks) EXPECT_EQ(r.losses.size(), 2u) << "rank " << r.rank;
}

TEST(Zero3Test, SendsTheRingsBytesExactly) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    for (int p : {2, 3}) {
      const train::RunSpec spec = tiny(model, 1);
      const train::RunOutcome out = testing::run_stage(3, spec, on(p));
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(testing::bytes_sent(out.report, r), testing::bytes_per_step(spec, 3, p, r))
            << testing::where(spec, p) << ", rank " << r;
    }
  }
}

DTW_TEST_STEPS(Zero3PitfallTest, "04.1", "04.3");
TEST(Zero3PitfallTest, ARankThatRunsALayerTwiceIsNamedWithTheLayer) {
  // deepspeedai/DeepSpeed#7998: rank 1 runs a module once more; the gathers
  // stop pairing up. The unit fingerprint names the ranks and the layers.
  try {
    train::run_ranks<double>(tiny("gpt-tiny", 1), on(3), [](train::RankRun<double>& run) {
      zero3_rank_runs_a_layer_twice(run);
    });
    FAIL() << "the mismatched gathers were not caught";
  } catch (const CollectiveMismatch& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks 0, 2 called zero3 gather h.1"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1 called zero3 gather h.0"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dtw::ch04
