// The field's pitfalls, each caught with a message that names what is
// wrong: the same runs as `dtw run pitfall NAME`.
#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::on;
using testing::tiny;

// Runs `strategy` with a fault and returns the mismatch or the error.
std::string caught(const train::RunSpec& spec, int t,
                   const std::function<void(train::RankRun<double>&)>& strategy) {
  DTW_TRACE_RUN(spec, t, {});
  try {
    const train::RunOutcome out = train::run_ranks<double>(spec, on(t), strategy);
    EXPECT_FALSE(out.matches) << "the fault went unnoticed";
    return out.mismatch;
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    return e.what();
  }
}

DTW_TEST_STEPS(SequenceParallelPitfallTest, "06.2", "06.5", "06.6");
TEST(SequenceParallelPitfallTest, NormGradientsNotSummedLetTheCopiesDriftAndAreNamed) {
  const std::string m = caught(tiny(2), 2, [](auto& run) {
    tensor_parallel_sp(run, {.norm_grads_not_reduced = true});
  });
  EXPECT_NE(m.find("after step 1"), std::string::npos) << m;
  EXPECT_NE(m.find("group rank 1"), std::string::npos) << m;
  EXPECT_NE(m.find("replicated tensor h.0.ln1.gamma differs"), std::string::npos) << m;
}

DTW_TEST_STEPS(TensorParallelPitfallTest, "06.1", "06.2", "06.5");
TEST(TensorParallelPitfallTest, AClipNormOverEveryCopyDiffersFromTheReference) {
  const std::string m =
      caught(tiny(2), 2, [](auto& run) { tensor_parallel(run, {.clip_counts_copies = true}); });
  EXPECT_NE(m.find("expected"), std::string::npos) << m;
}

TEST(TensorParallelPitfallTest, AVocabularyPaddedWithRowsInTheSoftmaxDiffersFromTheReference) {
  const std::string m = caught(testing::tiny_vocab99(), 4, [](auto& run) {
    tensor_parallel(run, {.pad_vocabulary = true});
  });
  EXPECT_NE(m.find("loss"), std::string::npos) << m;
}

TEST(TensorParallelPitfallTest, ALossFromLocalStatisticsDiffersFromTheReference) {
  const std::string m =
      caught(tiny(2), 2, [](auto& run) { tensor_parallel(run, {.local_vocab_statistics = true}); });
  EXPECT_NE(m.find("loss"), std::string::npos) << m;
}

}  // namespace
}  // namespace dtw::ch06
