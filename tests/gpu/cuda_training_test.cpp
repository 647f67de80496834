// Training on the device: a Replica on a CUDA Exec (parameters, gradients,
// optimizer state and activations on the GPU) trains as the host reference
// does, and every registered strategy of chapters 02-08 reproduces that
// reference with its ranks sharing the machine's GPUs (LaunchOptions::device
// "cuda": threads ranks, device buffers, each rank on a stream of its own).
// The same lab and solution code as on the host; only the ranks' Exec moved.
// Double runs are held to the reference's tolerance (1e-9 relative); the
// comparison is the harness's, inside each rank.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "dtw/train/harness.h"
#include "dtw/train/reference.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy_registry.h"
#include "gpu_test.h"

namespace dtw::train {
namespace {

using dtw::testing::Stream;

RunSpec tiny(const std::string& model, DType dtype) {
  RunSpec spec = standard_run(model);
  spec.steps = 3;
  spec.batch = 12;  // divides over 1, 2, 3, 4 and 6 ranks
  spec.dtype = dtype;
  return spec;
}

// The reference's loop (reference.cpp) on a device Exec.
template <class T>
ReferenceCheck train_on_device(const RunSpec& spec) {
  Stream stream;
  Replica<T> replica(spec, Exec::cuda(0, stream.s), ReplicaPlan::whole(spec));
  std::vector<double> losses;
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    losses.push_back(replica.forward_backward(step, 0, 1));
    replica.clip(replica.local_sum_of_squares());
    replica.step(step);
  }
  return compare_to_reference<T>(0, replica, losses);
}

TEST(CudaTrainingTest, AReplicaOnTheDeviceTrainsAsTheHostReference) {
  DTW_REQUIRE_GPUS(1);
  for (const char* model : {"gpt-tiny", "mlp-tiny"}) {
    SCOPED_TRACE(model);
    const ReferenceCheck d = train_on_device<double>(tiny(model, DType::kFloat64));
    EXPECT_TRUE(d.ok) << d.message;
    EXPECT_GT(d.compared, 0);
    std::printf("[ device   ] %s double: max |θ − θ_ref| %.3g, max relative %.3g\n", model,
                d.max_abs_diff, d.max_rel_error);
    // Float is judged on the losses only (the reference's policy).
    const ReferenceCheck f = train_on_device<float>(tiny(model, DType::kFloat32));
    EXPECT_TRUE(f.ok) << f.message;
  }
}

// Every strategy of a chapter, by name (registered by the chapters' demos).
std::vector<std::string> chapter_strategies() {
  std::vector<std::string> names;
  for (const Strategy& s : strategies())
    if (!s.chapter.empty() && s.chapter >= "02" && s.chapter <= "08") names.push_back(s.name);
  return names;
}

class CudaStrategyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaStrategyTest, ReproducesTheReferenceWithRanksSharingTheGpus) {
  DTW_REQUIRE_GPUS(1);
  const Strategy& strategy = find_strategy(GetParam());
  const RunSpec spec = tiny("gpt-tiny", DType::kFloat64);
  int runs = 0;
  for (int ranks : {2, 4}) {
    try {
      check_strategy(strategy, spec, ranks, {});
    } catch (const InvalidArgument&) {
      continue;  // a world this strategy does not take (its check says why)
    }
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    HarnessOptions o;
    o.ranks = ranks;
    o.device = "cuda";
    o.locate_divergence = false;
    const RunOutcome out = run_strategy(strategy, spec, o);
    ++runs;
    EXPECT_TRUE(out.matches) << out.mismatch;
    double worst = 0;
    for (const RankOutcome& r : out.ranks) worst = std::max(worst, r.max_abs_diff);
    std::printf("[ device   ] %s on %d ranks: %s, max |θ − θ_ref| %.3g\n", strategy.name.c_str(),
                ranks, out.checked ? (out.matches ? "matches" : "DIFFERS") : "not compared", worst);
  }
  EXPECT_GT(runs, 0) << "no world of 2 or 4 ranks was accepted";
}

INSTANTIATE_TEST_SUITE_P(Chapters, CudaStrategyTest, ::testing::ValuesIn(chapter_strategies()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace dtw::train
