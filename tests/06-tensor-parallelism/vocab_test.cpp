// Step 06.5: the vocabulary cut between the ranks. The embedding and the
// cross-entropy on t slices (even, and uneven: 13 rows) equal the
// single-device ones in double, with exactly the two small allreduces of
// the loss (row maxima; sums of exponentials and target logits) and never
// the logits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tp_test.h"

namespace dtw::ch06 {
namespace {

using testing::expect_allreduces;
using testing::expect_near;
using testing::on_ranks;
using testing::random_values;
using testing::Sent;

constexpr std::int64_t kRows = 10, kDim = 6;

std::vector<std::int32_t> tokens_of(std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> t;
  for (double v : random_values(kRows, seed))
    t.push_back(static_cast<std::int32_t>((v + 1) / 2 * static_cast<double>(vocab)));
  t[0] = 0;  // the first and the last row of the table are used
  t[1] = static_cast<std::int32_t>(vocab - 1);
  return t;
}

// got[i] / want[i] when that ratio is the same for every element (within
// 1e-9 relative; elements whose want is 0 must be 0), else NaN.
double uniform_ratio(const std::vector<double>& got, const std::vector<double>& want) {
  double ratio = std::nan("");
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0) {
      if (got[i] != 0) return std::nan("");
      continue;
    }
    const double q = got[i] / want[i];
    if (std::isnan(ratio)) ratio = q;
    else if (!(std::abs(q - ratio) <= 1e-9 * std::abs(ratio))) return std::nan("");
  }
  return ratio;
}

DTW_TEST_STEPS(VocabParallelTest, "06.1", "06.5");
// The slice first: a wrong vocab_slice fails here, by name, before it shows
// up as a wrong lookup in the embedding's test.
// 99 over 4 leaves 3 extra rows, 97 over 4 one: a split into ceil(V/t)-row
// blocks with the short one last gets 99 right by chance (25, 25, 25, 24), not
// 97 (25, 25, 25, 22), as a learner's first try showed.
TEST(VocabParallelTest, AVocabularyThatDoesNotDivideIsCutUnevenlyNeverPadded) {
  for (const auto& [vocab, t] : {std::pair<std::int64_t, int>{99, 4}, {97, 4}, {10, 3}, {12, 5}}) {
    DTW_TRACE("vocabulary slices of " << vocab << " rows over t = " << t);
    std::int64_t next = 0;
    for (int r = 0; r < t; ++r) {
      const model::IndexRange v = vocab_slice(vocab, r, t);
      EXPECT_EQ(v.begin, next) << "rank " << r << ": the slices follow each other";
      EXPECT_EQ(v.end - v.begin, vocab / t + (r < vocab % t ? 1 : 0))
          << "rank " << r << ": " << vocab << " / " << t << " = " << vocab / t << " rows each, and the first "
          << vocab % t << " ranks (" << vocab << " % " << t << ") hold one more";
      next = v.end;
    }
    EXPECT_EQ(next, vocab) << "every row held, none padded";
  }
}

TEST(VocabParallelTest, TheEmbeddingSumsTheSlicesLookupsAndEachRankKeepsItsRowsGradient) {
  for (std::int64_t vocab : {12, 13}) {
    const std::vector<double> wte = random_values(vocab * kDim, 31), dx = random_values(kRows * kDim, 32);
    const std::vector<std::int32_t> tokens = tokens_of(vocab, 33);
    std::vector<double> x(kRows * kDim), dwte(vocab * kDim, 0.0);
    for (std::int64_t i = 0; i < kRows; ++i)
      for (std::int64_t j = 0; j < kDim; ++j) {
        x[i * kDim + j] = wte[tokens[i] * kDim + j];
        dwte[tokens[i] * kDim + j] += dx[i * kDim + j];
      }
    for (int t : {1, 2, 3, 4}) {
      DTW_TRACE("vocab-parallel embedding, vocabulary " << vocab << ", t " << t);
      on_ranks(t, [&](Comm& group) {
        const int r = group.rank();
        const model::IndexRange v = vocab_slice(vocab, r, t);
        const std::int64_t n = v.end - v.begin;
        const std::vector<double> mine(wte.begin() + v.begin * kDim, wte.begin() + v.end * kDim);
        // NaN: the forward overwrites every row, its tokens' and the others' (zeros).
        std::vector<double> lx(x.size(), std::numeric_limits<double>::quiet_NaN()), ldw(n * kDim, 0.0);
        Sent before = Sent::now(group);
        vocab_parallel_embedding_forward<double>(group, lx.data(), tokens.data(), mine.data(),
                                                 v.begin, n, kRows, kDim);
        expect_allreduces(group, Sent::now(group) - before, 1, kRows * kDim, "embedding forward");
        expect_near(r, x, lx, "the looked-up rows");
        before = Sent::now(group);
        vocab_parallel_embedding_backward<double>(group, ldw.data(), dx.data(), tokens.data(),
                                                  v.begin, n, kRows, kDim);
        EXPECT_EQ((Sent::now(group) - before).messages, 0) << "the embedding's backward sends nothing";
        expect_near(r, {dwte.begin() + v.begin * kDim, dwte.begin() + v.end * kDim}, ldw,
                    "the rank's rows of dwte");
      });
    }
  }
}

TEST(VocabParallelTest, TheLossTakesTwoSmallAllreducesAndEqualsTheWholeCrossEntropy) {
  for (std::int64_t vocab : {12, 13}) {
    std::vector<double> logits = random_values(kRows * vocab, 41);
    for (double& l : logits) l *= 30;  // large logits: the maximum must be the global one
    const std::vector<std::int32_t> targets = tokens_of(vocab, 42);
    double loss = 0;
    std::vector<double> dlogits(logits.size()), log_z(kRows);
    for (std::int64_t i = 0; i < kRows; ++i) {
      const double* l = logits.data() + i * vocab;
      const double m = *std::max_element(l, l + vocab);
      double s = 0;
      for (std::int64_t j = 0; j < vocab; ++j) s += std::exp(l[j] - m);
      loss += std::log(s) + m - l[targets[i]];
      for (std::int64_t j = 0; j < vocab; ++j)
        dlogits[i * vocab + j] = (std::exp(l[j] - m) / s - (j == targets[i] ? 1.0 : 0.0)) / kRows;
      log_z[i] = m + std::log(s);  // the whole row's max + log Σ exp(logit − max)
    }
    loss /= kRows;
    for (int t : {1, 2, 3, 4}) {
      DTW_TRACE("vocab-parallel cross-entropy, vocabulary " << vocab << ", t " << t);
      on_ranks(t, [&](Comm& group) {
        const int r = group.rank();
        const model::IndexRange v = vocab_slice(vocab, r, t);
        const std::int64_t n = v.end - v.begin;
        std::vector<double> mine, want, dl(kRows * n, std::numeric_limits<double>::quiet_NaN());
        for (std::int64_t i = 0; i < kRows; ++i) {
          mine.insert(mine.end(), logits.begin() + i * vocab + v.begin, logits.begin() + i * vocab + v.end);
          want.insert(want.end(), dlogits.begin() + i * vocab + v.begin, dlogits.begin() + i * vocab + v.end);
        }
        const Sent before = Sent::now(group);
        const double got = vocab_parallel_cross_entropy<double>(group, dl.data(), mine.data(),
                                                                targets.data(), v.begin, n, kRows);
        const Sent sent = Sent::now(group) - before;
        // The two reductions' result, row by row, read back from dlogits: on a
        // column j that is not the target, dlogits·rows = exp(l_j − max)/Σ, so
        // l_j − log(dlogits·rows) is the row's max + log Σ exp(logit − max).
        // First a gradient off by one factor everywhere (the mean over rows
        // forgotten, or taken twice): the normalizers below would look wrong
        // too, and blame the reductions for it.
        const double scale = uniform_ratio(dl, want);
        const bool scaled = std::isfinite(scale) && std::abs(scale - 1) > 1e-6;
        if (scaled)
          ADD_FAILURE() << "rank " << r << ": every value of dlogits is " << scale
                        << " times the expected one"
                        << (std::abs(scale - kRows) <= 1e-6 * kRows
                                ? " -- the number of rows, " + std::to_string(kRows) +
                                      ": the loss is the mean over the rows, so each row's "
                                      "gradient (softmax − one-hot) is divided by rows"
                                : "");
        bool normalizers_right = !scaled;
        for (std::int64_t i = 0; i < kRows && normalizers_right; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            if (v.begin + j == targets[i]) continue;
            const double d = dl[i * n + j] * kRows;
            const double implied = d > 0 ? mine[i * n + j] - std::log(d) : std::nan("");
            if (!(std::abs(implied - log_z[i]) <= 1e-6 * std::max(1.0, std::abs(log_z[i])))) {
              normalizers_right = false;
              ADD_FAILURE() << "rank " << r << ", row " << i << ": the softmax's normalizer, "
                            << "max + log Σ exp(logit − max) over the whole vocabulary: expected "
                            << log_z[i] << ", your dlogits imply " << implied
                            << " (check the two reductions: the row maxima over the group with "
                            << "max, before the exponentials; then Σ exp(logit − max) summed "
                            << "over the group)";
            }
            break;
          }
        if (!(std::abs(got - loss) <= testing::kTol * std::abs(loss)))
          ADD_FAILURE() << "rank " << r << ": the loss: expected " << loss << ", got " << got
                        << (normalizers_right && !scaled
                                ? " (the maxima and sums are right, as dlogits show: check the "
                                  "target's logit, summed over the group with 0 from the ranks "
                                  "that do not hold it, and loss = mean over rows of max + "
                                  "log Σ − the target's logit)"
                                : "");
        expect_near(r, want, dl, "the rank's columns of dlogits");
        // Two allreduces: rows maxima, then 2·rows sums -- never rows·vocab logits.
        EXPECT_EQ(sent.messages, 2 * 2 * (t - 1)) << "rank " << r << ": two ring allreduces";
        EXPECT_EQ(sent.bytes, 8 * (ring_allreduce_values(kRows, r, t) +
                                   ring_allreduce_values(2 * kRows, r, t)))
            << "rank " << r << ": the maxima and the sums, nothing else";
      });
    }
  }
}

// The same two reductions where the GPT's head calls them (MegatronSeams).
DTW_TEST_STEPS(VocabSeamsTest, "06.5");
TEST(VocabSeamsTest, VocabMaxTakesTheMaximaAndVocabSumTheSumsOverTheGroup) {
  for (int t : {1, 2, 3}) {
    DTW_TRACE("Megatron seams' vocabulary reductions, t " << t << ", " << kRows << " rows");
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      std::vector<double> max_want(kRows, -1e300), sum_want(2 * kRows, 0.0);
      for (int q = 0; q < t; ++q) {
        const auto m = random_values(kRows, 60 + q), s = random_values(2 * kRows, 70 + q);
        for (std::int64_t i = 0; i < kRows; ++i) max_want[i] = std::max(max_want[i], m[i]);
        for (std::int64_t i = 0; i < 2 * kRows; ++i) sum_want[i] += s[i];
      }
      MegatronSeams<double> seams(group);
      std::vector<double> m = random_values(kRows, 60 + r), s = random_values(2 * kRows, 70 + r);
      Sent before = Sent::now(group);
      seams.vocab_max(std::span<double>(m));
      expect_near(r, max_want, m, "vocab_max: each row's maximum over every rank's slice");
      expect_allreduces(group, Sent::now(group) - before, 1, kRows, "vocab_max");
      before = Sent::now(group);
      seams.vocab_sum(std::span<double>(s));
      expect_near(r, sum_want, s, "vocab_sum: the sums of exponentials and target logits over every rank");
      expect_allreduces(group, Sent::now(group) - before, 1, 2 * kRows, "vocab_sum");
    });
  }
}

// The clip's norm: every cut tensor's slices add up, a replicated tensor
// counts once (torchtune#2420: counted per rank, the clip is too strong).
DTW_TEST_STEPS(ClipNormTest, "06.5");
TEST(ClipNormTest, TheSumOfSquaresCountsEachReplicatedTensorOnce) {
  const train::RunSpec spec = testing::tiny(1);
  const model::ModelConfig c = spec.config();
  const auto value = [](int q, std::int64_t i) { return 0.01 * (q + 1) + 0.001 * static_cast<double>(i % 17); };
  for (int t : {1, 2, 4}) {
    DTW_TRACE("clipping norm of gpt-tiny, t " << t);
    double want = 0, copies = 0;
    for (int q = 0; q < t; ++q) {
      const model::ParamLayout layout = model::param_layout(c, testing::test_shard(c, q, t));
      for (const model::ParamView& v : layout.views())
        for (std::int64_t i = 0; i < v.size; ++i) {
          const double g2 = value(q, v.offset + i) * value(q, v.offset + i);
          copies += g2;
          if (!v.is_whole() || q == 0) want += g2;
        }
    }
    on_ranks(t, [&](Comm& group) {
      const int r = group.rank();
      const model::ModelShard shard = testing::test_shard(c, r, t);
      const model::ParamLayout local = model::param_layout(c, shard);
      train::Replica<double> replica(
          spec, group.exec(),
          train::ReplicaPlan::slice(spec, shard, train::Replication::uncut(local, r, t)));
      std::span<double> grads = replica.grads();
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = value(r, static_cast<std::int64_t>(i));
      const Sent before = Sent::now(group);
      const double got = clip_sum_of_squares(group, replica);
      if (!(std::abs(got - want) <= testing::kTol * want))
        ADD_FAILURE() << "rank " << r << " of " << t << ": Σ g² expected " << want << ", got " << got
                      << (std::abs(got - copies) <= testing::kTol * copies
                              ? " (every rank's copy of the replicated tensors counted)"
                              : "");
      expect_allreduces(group, Sent::now(group) - before, 1, 1, "the clip's sum");
    });
  }
}

}  // namespace
}  // namespace dtw::ch06
