// The strategies: gpt-tiny trained with tp and tp-sp on t in {1, 2, 4}
// (and a model with 12 heads for t = 3) matches train_reference in double,
// every slice reported; a vocabulary that does not divide is cut unevenly
// and still matches, under both; bad input is refused on every rank naming the values.
#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::on;
using testing::tiny;

void tp(train::RankRun<double>& run) { tensor_parallel(run); }
void tp_sp(train::RankRun<double>& run) { tensor_parallel_sp(run); }

train::RunOutcome expect_matches(const train::RunSpec& spec, int t,
                                 void (*strategy)(train::RankRun<double>&)) {
  DTW_TRACE_RUN(spec, t, {});
  const train::RunOutcome out = train::run_ranks<double>(spec, on(t), strategy);
  EXPECT_TRUE(out.matches) << spec.model << " on t = " << t << ": " << out.mismatch;
  EXPECT_EQ(out.losses.size(), static_cast<std::size_t>(spec.steps));
  // Every element of the whole model reported by some rank.
  EXPECT_EQ(out.covered, model::param_layout(spec.config()).size()) << "t = " << t;
  return out;
}

// 12 heads of 4 and 192 hidden units: t = 3 divides them (and 24 tokens).
train::RunSpec twelve_heads() {
  train::RunSpec spec = tiny(2, 2);
  model::ModelConfig c = spec.config();
  c.name = "gpt-tiny-12-heads";
  c.dim = 48;
  c.heads = 12;
  c.mlp_hidden = 192;
  spec.model = c.name;
  spec.custom_config = c;
  spec.seq_len = 24;
  return spec;
}

DTW_TEST_STEPS(TensorParallelTest, "06.1", "06.2", "06.5");
TEST(TensorParallelTest, MatchesTheReferenceOnOneTwoAndFourRanks) {
  for (int t : {1, 2, 4}) expect_matches(tiny(), t, tp);
}

TEST(TensorParallelTest, MatchesTheReferenceOnThreeRanksOfATwelveHeadModel) {
  expect_matches(twelve_heads(), 3, tp);
}

TEST(TensorParallelTest, AVocabularyThatDoesNotDivideIsCutUnevenlyAndMatches) {
  expect_matches(testing::tiny_vocab99(), 4, tp);
}

DTW_TEST_STEPS(SequenceParallelTest, "06.2", "06.5", "06.6");  // 06.5: the clip's norm
TEST(SequenceParallelTest, MatchesTheReferenceOnOneTwoAndFourRanks) {
  for (int t : {1, 2, 4}) expect_matches(tiny(), t, tp_sp);
}

TEST(SequenceParallelTest, MatchesTheReferenceOnThreeRanksOfATwelveHeadModel) {
  expect_matches(twelve_heads(), 3, tp_sp);
}

// Under SP the head's logits cover every token of the rank's vocabulary
// columns, so an uneven cut (25, 25, 25 and 24 rows) reaches the loss's
// reductions as under tp.
TEST(SequenceParallelTest, AVocabularyThatDoesNotDivideIsCutUnevenlyAndMatches) {
  expect_matches(testing::tiny_vocab99(), 4, tp_sp);
}

DTW_TEST_STEPS(TensorParallelArgumentsTest);
TEST(TensorParallelArgumentsTest, HeadsThatDoNotDivideAreRefusedOnEveryRankNamingTheValues) {
  testing::expect_error([&] { train::run_ranks<double>(tiny(1), on(3), tp); },
                        {"4 heads do not split over t = 3"});
  testing::expect_error([&] { check_tp_run(tiny(1), 3, -1, false); }, {"4 heads", "t = 3"});
}

// The heads split (step 06.2's code runs), then the sequence does not.
DTW_TEST_STEPS(SequenceSplitArgumentsTest, "06.2");
TEST(SequenceSplitArgumentsTest, ASequenceThatDoesNotSplitIsRefusedBeforeAnyMessage) {
  train::RunSpec spec = tiny(1);
  spec.seq_len = 30;
  testing::expect_error([&] { check_tp_run(spec, 4, 1, true); },
                        {"rank 1", "sequence of 30 tokens", "t = 4"});
}

}  // namespace
}  // namespace dtw::ch06
