// Step 02.3: DDP with gradient buckets. It matches the reference on 1-4 ranks
// for both models and several caps (one bucket per tensor, a few, one for
// everything); the traffic shows one allreduce per bucket per step (counted
// from the messages, not from the strategy's own bookkeeping); the default cap
// cuts the same buckets in float and double; a bad cap is a clear error on
// every rank.
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
    DTW_TRACE("ddp-bucketed's traffic on 3 ranks, bucket_kib=" << kib
                                                             << ": one ring allreduce per bucket per step");
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

TEST(DdpBucketedTest, TheDefaultCapCutsTheSameBucketsInFloatAndDouble) {
  // The default cap counts values, so a double run's is twice a float run's
  // in KiB; a cap fixed in bytes cut a double run into twice the buckets.
  for (const char* model : {"gpt-tiny", "mlp-tiny", "gpt-small"}) {
    train::RunSpec f32 = train::standard_run(model), f64 = f32;
    f32.dtype = train::DType::kFloat32;
    f64.dtype = train::DType::kFloat64;
    EXPECT_EQ(default_bucket_kib(f64), 2 * default_bucket_kib(f32)) << model;
    const model::ParamLayout layout = model::param_layout(f32.config());
    const auto in_float = make_buckets(layout, ddp_options({}, f32, 0).bucket_bytes, sizeof(float));
    const auto in_double =
        make_buckets(layout, ddp_options({}, f64, 0).bucket_bytes, sizeof(double));
    ASSERT_EQ(in_float.size(), in_double.size()) << model;
    EXPECT_GT(in_float.size(), 1u) << model;
    for (std::size_t b = 0; b < in_float.size(); ++b) {
      EXPECT_EQ(in_float[b].begin, in_double[b].begin) << model << ", bucket " << b;
      EXPECT_EQ(in_float[b].end, in_double[b].end) << model << ", bucket " << b;
    }
  }
  // And the runs: one allreduce per bucket per step, so the same messages.
  train::RunSpec spec = tiny("mlp-tiny", 2);
  const train::Knobs once = train::Knobs().set("check_every", "0");
  spec.dtype = train::DType::kFloat32;
  const train::RunOutcome f = train::run_ranks<float>(
      spec, testing::on(2, once), [](train::RankRun<float>& run) { ddp_bucketed(run); });
  spec.dtype = train::DType::kFloat64;
  const train::RunOutcome d = train::run_ranks<double>(spec, testing::on(2, once), bucketed);
  EXPECT_EQ(f.report.traffic.total_messages(), d.report.traffic.total_messages());
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
