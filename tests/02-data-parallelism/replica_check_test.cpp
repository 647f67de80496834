// Step 02.2: replicas that agree. The broadcast gives every rank rank 0's
// parameters; the fingerprint check names the first rank and tensor that
// differ (a planted one-element perturbation on one rank); ranks that would
// train different runs are stopped before any training message.
#include <gtest/gtest.h>

#include <string>

#include "dp_test.h"
#include "dtw_test.h"

namespace dtw::ch02 {
namespace {

using testing::tiny;

DTW_TEST_STEPS(ReplicaFingerprintTest, "02.2");
TEST(ReplicaFingerprintTest, OneChangedBitChangesItsTensorsFingerprintOnly) {
  const train::RunSpec spec = tiny("gpt-tiny");
  DTW_TRACE("fingerprints of gpt-tiny before and after one ulp of h.1.attn.qkv.weight[37]");
  const model::ParamLayout layout = model::param_layout(spec.config());
  std::vector<double> params(static_cast<std::size_t>(layout.size()));
  model::init_params(spec.config(), layout, spec.seed, params.data());
  const auto before = fingerprint<double>(layout, params);
  ASSERT_EQ(before.size(), layout.views().size());
  const model::ParamView& qkv = layout.find("h.1.attn.qkv.weight");
  params[static_cast<std::size_t>(qkv.offset + 37)] =
      std::nextafter(params[static_cast<std::size_t>(qkv.offset + 37)], 1.0);
  const auto after = fingerprint<double>(layout, params);
  for (std::size_t t = 0; t < before.size(); ++t) {
    if (layout.views()[t].name == qkv.name)
      EXPECT_NE(after[t], before[t])
          << qkv.name << "'s hash did not change with its element 37: every element's bits go "
          << "into its tensor's hash";
    else
      EXPECT_EQ(after[t], before[t])
          << layout.views()[t].name << "'s hash changed with an element of " << qkv.name
          << ": a tensor's hash takes its own elements only (from its offset)";
  }
}

DTW_TEST_STEPS(ReplicaCheckTest, "02.2");
TEST(ReplicaCheckTest, TheBroadcastStartsEveryRankFromRankZerosParameters) {
  const train::RunSpec spec = tiny("mlp-tiny");
  DTW_TRACE("broadcast_parameters on 3 ranks, ranks 1 and 2 starting from other values");
  dtw::testing::launch_bounded(3, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    std::vector<double> rank0(replica.params().begin(), replica.params().end());
    // The other ranks start from something else entirely.
    if (comm.rank() != 0)
      for (double& x : replica.params()) x = comm.rank();
    broadcast_parameters(comm, replica);
    const std::vector<double> got(replica.params().begin(), replica.params().end());
    DTW_EXPECT_SAME(comm.rank(), rank0, got);
  });
}

TEST(ReplicaCheckTest, NamesTheRankAndTensorOfAPlantedPerturbation) {
  const train::RunSpec spec = tiny("gpt-tiny");
  DTW_TRACE("check_replicas on 3 ranks, one ulp of h.1.attn.qkv.weight changed on rank 2");
  const std::string message = testing::expect_error(
      [&] {
        dtw::testing::launch_bounded(3, [&](Comm& comm) {
          train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
          const model::ParamView& qkv = replica.layout().find("h.1.attn.qkv.weight");
          // One element of one tensor on rank 2, one ulp: the smallest divergence there is.
          if (comm.rank() == 2) {
            double& x = replica.params(qkv.offset + 37, qkv.offset + 38)[0];
            x = std::nextafter(x, 2.0);
          }
          check_replicas<double>(comm, replica.layout(), replica.params(), 3);
        });
      },
      {"replicas diverged after 3 steps: rank 2's h.1.attn.qkv.weight differs from rank 0's"});
  EXPECT_NE(message.find("fingerprint 0x"), std::string::npos) << message;
}

TEST(ReplicaCheckTest, EqualReplicasPass) {
  const train::RunSpec spec = tiny("mlp-tiny");
  DTW_TRACE("check_replicas on 4 equal ranks");
  dtw::testing::launch_bounded(4, [&](Comm& comm) {
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    check_replicas<double>(comm, replica.layout(), replica.params(), 0);
  });
}

// check_same_run stops the ranks before any training message (no lab code runs).
DTW_TEST_STEPS(SameRunCheckTest);
TEST(SameRunCheckTest, RanksThatWouldTrainDifferentModelsFailAtTheStart) {
  const train::RunSpec spec = tiny("gpt-tiny");
  testing::expect_error(
      [&] {
        dtw::testing::launch_bounded(3, [&](Comm& comm) {
          const train::RunSpec mine = comm.rank() == 1 ? tiny("mlp-tiny") : spec;
          const train::Knobs knobs;
          train::RankRun<double> run(comm, mine, knobs);
          dp_allreduce(run);
        });
      },
      {"ranks 0 and 1 would train different runs", "'mlp-tiny'", "'gpt-tiny'"});
}

TEST(SameRunCheckTest, RanksWithDifferentSeedsFailAtTheStartNamingTheField) {
  testing::expect_error(
      [&] {
        dtw::testing::launch_bounded(3, [&](Comm& comm) {
          train::RunSpec mine = tiny("mlp-tiny");
          if (comm.rank() == 2) mine.seed = 99;
          const train::Knobs knobs;
          train::RankRun<double> run(comm, mine, knobs);
          dp_allreduce(run);
        });
      },
      {"ranks 0 and 2 would train different runs", "seed '99' where rank 0 has '1234'"});
}

}  // namespace
}  // namespace dtw::ch02
