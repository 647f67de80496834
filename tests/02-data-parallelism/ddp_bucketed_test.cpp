// Step 02.3: DDP with gradient buckets. It matches the reference on 1-4 ranks
// for both models and several caps (one bucket per tensor, a few, one for
// everything); the traffic shows one allreduce per bucket per step (counted
// from the messages, not from the strategy's own bookkeeping); a bad cap is a
// clear error on every rank.
#include <gtest/gtest.h>

#include <string>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::model_size;
using testing::tiny;

void bucketed(train::RankRun<double>& run) {
  ddp_bucketed(run);
}

train::Knobs cap_kib(std::int64_t kib) {
  return train::Knobs().set("bucket_kib", std::to_string(kib));
}

DTW_TEST_STEPS(DdpBucketedTest, "02.2", "02.3");
TEST(DdpBucketedTest, MatchesTheReferenceOnOneToFourRanksForEveryCap) {
  // 1 KiB: about one bucket per tensor; 16 KiB: a few per block; 1 GiB: one.
  const std::int64_t caps[] = {1, 16, 1 << 20};
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int p = 1; p <= 4; ++p) expect_matches(tiny(model), p, bucketed, cap_kib(caps[p % 3]));
}

TEST(DdpBucketedTest, StartsOneAllreducePerBucketPerStep) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const int p = 3;
  for (const std::int64_t kib : {1, 16, 1 << 20}) {
    train::Knobs knobs = cap_kib(kib);
    knobs.set("check_every", "0");
    const train::RunOutcome out = expect_matches(spec, p, bucketed, knobs);
    const std::int64_t buckets = static_cast<std::int64_t>(
        make_buckets(model::param_layout(spec.config()), kib * 1024, sizeof(double)).size());
    // A ring allreduce is 2(p−1) messages from every rank (empty chunks still
    // send); per step one per bucket and one for the loss. The broadcast at
    // the start reaches each other rank once.
    const std::int64_t messages = out.report.traffic.total_messages();
    const std::int64_t allreduces = (messages - (p - 1)) / (p * 2 * (p - 1));
    EXPECT_EQ(messages, (p - 1) + spec.steps * (buckets + 1) * p * 2 * (p - 1))
        << kib << " KiB: " << buckets << " buckets";
    EXPECT_EQ(allreduces, spec.steps * (buckets + 1)) << kib << " KiB";
    // The bytes are one allreduce's, however the gradients are cut.
    EXPECT_EQ(out.report.total_bytes(),
              static_cast<std::int64_t>(sizeof(double)) *
                  ((p - 1) * model_size(spec) + spec.steps * 2 * (p - 1) * (model_size(spec) + 1)))
        << kib << " KiB";
  }
}

TEST(DdpBucketedTest, FloatRunsFollowTheReferencesLossCurve) {
  train::RunSpec spec = tiny("gpt-tiny", 3);
  spec.dtype = train::DType::kFloat32;
  const train::RunOutcome out = train::run_ranks<float>(
      spec, testing::on(2, cap_kib(8)), [](train::RankRun<float>& run) { ddp_bucketed(run); });
  EXPECT_TRUE(out.matches) << out.mismatch;
}

DTW_TEST_STEPS(DdpBucketedArgumentsTest);
TEST(DdpBucketedArgumentsTest, ABucketCapOfZeroOrLessIsAClearErrorOnEveryRank) {
  for (const char* kib : {"0", "-3"}) {
    testing::expect_error(
        [&] {
          train::run_ranks<double>(tiny("mlp-tiny", 1),
                                   testing::on(2, train::Knobs().set("bucket_kib", kib)), bucketed);
        },
        {std::string("bucket_kib=") + kib, "at least 1 KiB"});
  }
}

}  // namespace
}  // namespace dtw::ch02
