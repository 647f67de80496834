// The tokenizer, the two token tasks and the classification task: targets are
// the next tokens, samples are pure functions of (seed, step, sample), and the
// shards of D ranks concatenate to the one-device batch bitwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/data.h"

namespace dtw::model {
namespace {

using ::testing::HasSubstr;

template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no InvalidArgument; expected one mentioning '" << needles.front() << "'";
  } catch (const InvalidArgument& e) {
    for (const std::string& needle : needles) EXPECT_THAT(e.what(), HasSubstr(needle));
  }
}

std::vector<std::int32_t> row(const std::vector<std::int32_t>& v, std::int64_t r,
                              std::int64_t len) {
  return {v.begin() + r * len, v.begin() + (r + 1) * len};
}

constexpr TokenTask kTasks[] = {TokenTask::kSynthetic, TokenTask::kCorpus};

TEST(TokenizerTest, RoundTripsTheWholeCorpus) {
  const std::string_view text = corpus_text();
  // "A few tens of KiB": enough text to learn from, small enough to embed.
  EXPECT_GE(text.size(), 20u * 1024);
  EXPECT_LE(text.size(), 40u * 1024);
  const std::vector<std::int32_t> ids = encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(decode(ids), text);
  // A real text: most letters in both cases, punctuation, newlines (it has 56 ids).
  EXPECT_GE(std::set<std::int32_t>(ids.begin(), ids.end()).size(), 50u);
}

TEST(TokenizerTest, MapsNewlineAndPrintableAsciiToFixedIds) {
  EXPECT_EQ(encode("\n ~!A"), (std::vector<std::int32_t>{0, 1, 95, 2, 34}));
  EXPECT_EQ(decode({0, 1, 95, 2, 34}), "\n ~!A");
  EXPECT_TRUE(encode("").empty());
}

TEST(TokenizerTest, EncodeRejectsNonAsciiNamingOffsetAndValue) {
  expect_invalid([] { encode("caf\xc3\xa9"); }, {"offset 3", "byte 195"});
  expect_invalid([] { encode("a\tb"); }, {"offset 1", "byte 9"});
  expect_invalid([] { encode(std::string_view("x\0", 2)); }, {"offset 1", "byte 0"});
  expect_invalid([] { encode("\x7f"); }, {"offset 0", "byte 127"});
}

TEST(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  expect_invalid([] { decode({5, 96}); }, {"id 96", "index 1"});
  expect_invalid([] { decode({-1}); }, {"id -1", "index 0"});
}

TEST(TokenTaskTest, ParsesNamesAndListsThemOnError) {
  EXPECT_EQ(token_task_from_name("synthetic"), TokenTask::kSynthetic);
  EXPECT_EQ(token_task_from_name("corpus"), TokenTask::kCorpus);
  expect_invalid([] { token_task_from_name("wiki"); }, {"'wiki'", "synthetic", "corpus"});
}

TEST(TokenBatchTest, CorpusTargetsAreTheNextCharacters) {
  const std::string text(corpus_text());
  for (std::int64_t seq_len : {1, 7, 64}) {
    const TokenBatch b = token_batch(TokenTask::kCorpus, 5, 3, 12, seq_len, kCharVocab);
    ASSERT_EQ(b.sequences, 12);
    ASSERT_EQ(b.seq_len, seq_len);
    ASSERT_EQ(b.tokens.size(), static_cast<std::size_t>(12 * seq_len));
    for (std::int64_t r = 0; r < 12; ++r) {
      const std::vector<std::int32_t> t = row(b.tokens, r, seq_len), y = row(b.targets, r, seq_len);
      // The window plus its last target is seq_len + 1 consecutive corpus characters.
      const std::string window = decode(t) + decode({y.back()});
      EXPECT_NE(text.find(window), std::string::npos) << "row " << r << ": '" << window << "'";
      for (std::int64_t j = 0; j + 1 < seq_len; ++j)
        EXPECT_EQ(y[static_cast<std::size_t>(j)], t[static_cast<std::size_t>(j + 1)]);
    }
  }
}

TEST(TokenBatchTest, LongestCorpusWindowIsTheWholeText) {
  // seq_len = length − 1 leaves one valid start, 0: every sample is the corpus.
  const std::vector<std::int32_t> ids = encode(corpus_text());
  const auto len = static_cast<std::int64_t>(ids.size()) - 1;
  const TokenBatch b = token_batch(TokenTask::kCorpus, 1, 0, 2, len, kCharVocab);
  EXPECT_EQ(row(b.tokens, 1, len), std::vector<std::int32_t>(ids.begin(), ids.end() - 1));
  EXPECT_EQ(row(b.targets, 1, len), std::vector<std::int32_t>(ids.begin() + 1, ids.end()));
}

// Reads π off a batch: every (token, target) pair is one arrow of the map.
std::map<std::int32_t, std::int32_t> arrows(const TokenBatch& b) {
  std::map<std::int32_t, std::int32_t> pi;
  for (std::size_t i = 0; i < b.tokens.size(); ++i) {
    const auto [it, fresh] = pi.emplace(b.tokens[i], b.targets[i]);
    EXPECT_EQ(it->second, b.targets[i]) << "token " << b.tokens[i] << " has two successors";
  }
  return pi;
}

TEST(TokenBatchTest, SyntheticTokensFollowOneFixedPermutation) {
  constexpr std::int64_t kVocab = 50, kLen = 16;
  const TokenBatch b = token_batch(TokenTask::kSynthetic, 9, 0, 64, kLen, kVocab);
  for (std::int64_t r = 0; r < 64; ++r) {
    const auto t = row(b.tokens, r, kLen), y = row(b.targets, r, kLen);
    for (std::int64_t j = 0; j + 1 < kLen; ++j)
      EXPECT_EQ(y[static_cast<std::size_t>(j)], t[static_cast<std::size_t>(j + 1)]);
  }
  const auto pi = arrows(b);
  // 64 random starts × 16 steps visit every token of a 50-vocabulary
  // permutation's cycles with overwhelming probability; for this seed, all.
  ASSERT_EQ(pi.size(), static_cast<std::size_t>(kVocab));
  std::set<std::int32_t> images;
  for (const auto& [from, to] : pi) {
    EXPECT_TRUE(to >= 0 && to < kVocab) << to;
    images.insert(to);
  }
  EXPECT_EQ(images.size(), static_cast<std::size_t>(kVocab)) << "π is not one-to-one";
  // π depends on the seed only: another step follows the same arrows...
  const auto later = arrows(token_batch(TokenTask::kSynthetic, 9, 41, 64, kLen, kVocab));
  for (const auto& [from, to] : later) EXPECT_EQ(pi.at(from), to) << "token " << from;
  // ...and another seed draws another permutation.
  EXPECT_NE(arrows(token_batch(TokenTask::kSynthetic, 10, 0, 64, kLen, kVocab)), pi);
  // Start tokens are drawn per sample: not all rows start alike.
  std::set<std::int32_t> starts;
  for (std::int64_t r = 0; r < 64; ++r) starts.insert(b.tokens[static_cast<std::size_t>(r * kLen)]);
  EXPECT_GT(starts.size(), 20u);
}

TEST(TokenBatchTest, ShardsConcatenateToTheSingleDeviceBatch) {
  constexpr std::int64_t kGlobal = 12, kLen = 9;
  for (TokenTask task : kTasks) {
    const TokenBatch whole = token_batch(task, 7, 5, kGlobal, kLen, 100);
    for (std::int64_t shards : {1, 2, 3, 4}) {
      std::vector<std::int32_t> tokens, targets;
      for (std::int64_t s = 0; s < shards; ++s) {
        const TokenBatch part = token_batch(task, 7, 5, kGlobal, kLen, 100, s, shards);
        EXPECT_EQ(part.sequences, kGlobal / shards);
        tokens.insert(tokens.end(), part.tokens.begin(), part.tokens.end());
        targets.insert(targets.end(), part.targets.begin(), part.targets.end());
      }
      EXPECT_EQ(tokens, whole.tokens) << "shards " << shards;
      EXPECT_EQ(targets, whole.targets) << "shards " << shards;
    }
  }
}

TEST(TokenBatchTest, SameSeedAndStepRepeatOtherStepsDiffer) {
  for (TokenTask task : kTasks) {
    const TokenBatch a = token_batch(task, 3, 10, 12, 32, 96);
    EXPECT_EQ(token_batch(task, 3, 10, 12, 32, 96).tokens, a.tokens);
    EXPECT_NE(token_batch(task, 3, 11, 12, 32, 96).tokens, a.tokens);
    EXPECT_NE(token_batch(task, 4, 10, 12, 32, 96).tokens, a.tokens);
    // Samples within a step differ too (not one window repeated).
    EXPECT_NE(row(a.tokens, 0, 32), row(a.tokens, 1, 32));
  }
}

TEST(ClassBatchTest, ShardsConcatenateToTheSingleDeviceBatch) {
  const ClassBatch whole = class_batch(11, 2, 12, 5, 4);
  ASSERT_EQ(whole.inputs.size(), 60u);
  for (std::int64_t shards : {1, 2, 3, 4}) {
    std::vector<float> inputs;
    std::vector<std::int32_t> labels;
    for (std::int64_t s = 0; s < shards; ++s) {
      const ClassBatch part = class_batch(11, 2, 12, 5, 4, s, shards);
      EXPECT_EQ(part.rows, 12 / shards);
      EXPECT_EQ(part.features, 5);
      inputs.insert(inputs.end(), part.inputs.begin(), part.inputs.end());
      labels.insert(labels.end(), part.labels.begin(), part.labels.end());
    }
    // Bitwise: the same floats, not merely close ones.
    EXPECT_EQ(inputs, whole.inputs) << "shards " << shards;
    EXPECT_EQ(labels, whole.labels) << "shards " << shards;
  }
}

TEST(ClassBatchTest, DeterministicStandardNormalInputsAndEveryClassAppears) {
  constexpr std::int64_t kRows = 1000, kFeatures = 16, kClasses = 10;
  const ClassBatch b = class_batch(1, 0, kRows, kFeatures, kClasses);
  const ClassBatch again = class_batch(1, 0, kRows, kFeatures, kClasses);
  EXPECT_EQ(b.inputs, again.inputs);
  EXPECT_EQ(b.labels, again.labels);
  EXPECT_NE(class_batch(1, 1, kRows, kFeatures, kClasses).inputs, b.inputs);
  // 16000 draws of N(0, 1): the mean's standard error is 1/√16000 ≈ 0.008 and
  // the variance's √(2/16000) ≈ 0.011, so 0.05 is over four of either.
  double sum = 0, sum2 = 0;
  for (float x : b.inputs) {
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(b.inputs.size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sum2 / n - mean * mean, 1.0, 0.05);
  // Labels in range, and every class wins some rows (the teacher's rows have
  // unit length, so no class is starved by a short weight vector).
  std::vector<int> count(kClasses, 0);
  for (std::int32_t label : b.labels) {
    ASSERT_TRUE(label >= 0 && label < kClasses) << label;
    ++count[static_cast<std::size_t>(label)];
  }
  for (std::int64_t c = 0; c < kClasses; ++c)
    EXPECT_GT(count[static_cast<std::size_t>(c)], 0) << "class " << c << " never appears";
  EXPECT_LT(*std::max_element(count.begin(), count.end()), kRows / 2) << "one class dominates";
}

TEST(ClassBatchTest, TeacherIsFixedAcrossSteps) {
  // The teacher is internal, but its effect can be estimated: the mean input
  // of each class at step 0 points roughly along that class's teacher row.
  // Classifying step 1's rows by the nearest such direction then beats chance
  // (1/3) by far only if step 1 is labelled by the same teacher.
  constexpr std::int64_t kRows = 1000, kFeatures = 8, kClasses = 3;
  const ClassBatch train = class_batch(21, 0, kRows, kFeatures, kClasses);
  std::vector<double> mean(kClasses * kFeatures, 0.0);
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t f = 0; f < kFeatures; ++f)
      mean[static_cast<std::size_t>(train.labels[static_cast<std::size_t>(r)] * kFeatures + f)] +=
          train.inputs[static_cast<std::size_t>(r * kFeatures + f)];
  for (std::int64_t c = 0; c < kClasses; ++c) {  // unit length, like the teacher's rows
    double norm2 = 0;
    for (std::int64_t f = 0; f < kFeatures; ++f) norm2 += std::pow(mean[c * kFeatures + f], 2);
    for (std::int64_t f = 0; f < kFeatures; ++f) mean[c * kFeatures + f] /= std::sqrt(norm2);
  }
  const ClassBatch test = class_batch(21, 1, kRows, kFeatures, kClasses);
  int correct = 0;
  for (std::int64_t r = 0; r < kRows; ++r) {
    std::int32_t best = 0;
    double best_score = -1e300;
    for (std::int64_t c = 0; c < kClasses; ++c) {
      double score = 0;
      for (std::int64_t f = 0; f < kFeatures; ++f)
        score += mean[c * kFeatures + f] * test.inputs[static_cast<std::size_t>(r * kFeatures + f)];
      if (score > best_score) best_score = score, best = static_cast<std::int32_t>(c);
    }
    correct += best == test.labels[static_cast<std::size_t>(r)];
  }
  EXPECT_GT(correct, 700) << "of " << kRows;
  EXPECT_NE(class_batch(22, 0, kRows, kFeatures, kClasses).labels, train.labels);
}

TEST(DataErrorsTest, BadInputNamesTheValues) {
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, 0, 12, 8, 50, 0, 5); },
                 {"global_batch 12", "shards 5"});
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, 0, 12, 8, 50, 4, 4); },
                 {"shard 4", "[0, 4)"});
  expect_invalid([] { token_batch(TokenTask::kCorpus, 0, 0, 12, 8, 96, -1, 4); }, {"shard -1"});
  const auto length = static_cast<std::int64_t>(corpus_text().size());
  expect_invalid([length] { token_batch(TokenTask::kCorpus, 0, 0, 4, length, 96); },
                 {"seq_len " + std::to_string(length), "corpus length " + std::to_string(length)});
  expect_invalid([] { token_batch(TokenTask::kCorpus, 0, 0, 4, 8, 50); }, {"96", "got 50"});
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, 0, 4, 0, 50); }, {"seq_len 0"});
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, -2, 4, 8, 50); }, {"step -2"});
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, 0, 0, 8, 50); }, {"global_batch 0"});
  expect_invalid([] { token_batch(TokenTask::kSynthetic, 0, 0, 4, 8, 1); }, {"vocab 1"});
  expect_invalid([] { class_batch(0, 0, 10, 4, 3, 0, 4); }, {"global_batch 10", "shards 4"});
  expect_invalid([] { class_batch(0, 0, 8, 0, 3); }, {"features 0"});
  expect_invalid([] { class_batch(0, 0, 8, 4, 1); }, {"classes 1"});
  expect_invalid([] { class_batch(0, 0, 8, 4, 3, 2, 2); }, {"shard 2", "[0, 2)"});
}

}  // namespace
}  // namespace dtw::model
