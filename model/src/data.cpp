// The tokenizer and the samplers behind every training chapter's data.
//
// Every random choice is a hash of what it is for — (seed, tag, step, sample,
// ...) — never the next draw of a generator, so sample g of step s comes out
// the same whichever rank asks for it and whatever it asked for before. That
// is what lets D data-parallel ranks reproduce a one-device run bitwise.
#include "dtw/model/data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "dtw/errors.h"
#include "dtw/model/random.h"

namespace dtw::model {
namespace {

// One tag per kind of random choice, so e.g. the start token of sample 3 and
// the window of sample 3 are independent draws.
constexpr std::uint64_t kPermutationTag = hash_name("data/permutation");
constexpr std::uint64_t kStartTag = hash_name("data/start");
constexpr std::uint64_t kWindowTag = hash_name("data/window");
constexpr std::uint64_t kInputTag = hash_name("data/input");
constexpr std::uint64_t kTeacherTag = hash_name("data/teacher");

std::uint64_t u64(std::int64_t x) {
  return static_cast<std::uint64_t>(x);
}

// Uniform in [0, k) from a hash. The bias of scaling 53 random bits is below
// k/2^53, far under anything a training run could notice.
std::int64_t index_below(std::uint64_t h, std::int64_t k) {
  const auto i = static_cast<std::int64_t>(uniform01(h) * static_cast<double>(k));
  return std::min(i, k - 1);
}

// The rank's slice of the global batch: samples [first, first + count).
struct Slice {
  std::int64_t first, count;
};

Slice check_sharding(const char* fn, std::int64_t step, std::int64_t global_batch,
                     std::int64_t shard, std::int64_t shards) {
  DTW_CHECK_ARG(step >= 0, fn << ": step " << step << " is negative");
  DTW_CHECK_ARG(global_batch >= 1, fn << ": global_batch " << global_batch << " must be >= 1");
  DTW_CHECK_ARG(shards >= 1, fn << ": shards " << shards << " must be >= 1");
  DTW_CHECK_ARG(shard >= 0 && shard < shards,
                fn << ": shard " << shard << " is outside [0, " << shards << ")");
  DTW_CHECK_ARG(global_batch % shards == 0, fn << ": global_batch " << global_batch
                                               << " is not divisible by shards " << shards);
  const std::int64_t per_shard = global_batch / shards;
  return {shard * per_shard, per_shard};
}

// π as a table: Fisher–Yates with its swap indices keyed by (seed, i), so π
// depends on the seed alone. O(vocab) per batch, negligible next to a step.
std::vector<std::int32_t> permutation(std::uint64_t seed, std::int64_t vocab) {
  std::vector<std::int32_t> pi(static_cast<std::size_t>(vocab));
  std::iota(pi.begin(), pi.end(), 0);
  for (std::int64_t i = vocab - 1; i > 0; --i) {
    const std::int64_t j = index_below(hash_key(seed, kPermutationTag, u64(i)), i + 1);
    std::swap(pi[static_cast<std::size_t>(i)], pi[static_cast<std::size_t>(j)]);
  }
  return pi;
}

// Encoded once, on first use (a function-local static is thread-safe to initialise).
const std::vector<std::int32_t>& corpus_tokens() {
  static const std::vector<std::int32_t> tokens = encode(corpus_text());
  return tokens;
}

}  // namespace

std::vector<std::int32_t> encode(std::string_view text) {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\n') {
      ids[i] = 0;
    } else {
      DTW_CHECK_ARG(byte >= ' ' && byte <= '~',
                    "encode: byte " << static_cast<int>(byte) << " at offset " << i
                                    << " is neither a newline nor printable ASCII (32..126)");
      ids[i] = static_cast<std::int32_t>(byte - ' ' + 1);
    }
  }
  return ids;
}

std::string decode(const std::vector<std::int32_t>& ids) {
  std::string text(ids.size(), '\n');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    DTW_CHECK_ARG(id >= 0 && id < kCharVocab, "decode: id " << id << " at index " << i
                                                            << " is outside [0, " << kCharVocab
                                                            << ")");
    if (id != 0) text[i] = static_cast<char>(' ' + id - 1);
  }
  return text;
}

TokenTask token_task_from_name(std::string_view name) {
  if (name == "synthetic") return TokenTask::kSynthetic;
  if (name == "corpus") return TokenTask::kCorpus;
  DTW_CHECK_ARG(false, "unknown token task '" << name << "' (known: synthetic, corpus)");
  return TokenTask::kSynthetic;  // not reached
}

TokenBatch token_batch(TokenTask task, std::uint64_t seed, std::int64_t step,
                       std::int64_t global_batch, std::int64_t seq_len, std::int64_t vocab,
                       std::int64_t shard, std::int64_t shards) {
  const Slice slice = check_sharding("token_batch", step, global_batch, shard, shards);
  DTW_CHECK_ARG(seq_len >= 1, "token_batch: seq_len " << seq_len << " must be >= 1");
  DTW_CHECK_ARG(vocab >= 2 && vocab <= std::numeric_limits<std::int32_t>::max(),
                "token_batch: vocab " << vocab << " is outside [2, 2^31)");
  TokenBatch batch;
  batch.sequences = slice.count;
  batch.seq_len = seq_len;
  const auto size = static_cast<std::size_t>(slice.count * seq_len);
  batch.tokens.resize(size);
  batch.targets.resize(size);

  if (task == TokenTask::kSynthetic) {
    const std::vector<std::int32_t> pi = permutation(seed, vocab);
    for (std::int64_t r = 0; r < slice.count; ++r) {
      const std::int64_t g = slice.first + r;  // the sample's global index keys it
      auto t = static_cast<std::int32_t>(
          index_below(hash_key(seed, kStartTag, u64(step), u64(g)), vocab));
      for (std::int64_t j = 0; j < seq_len; ++j) {
        const auto at = static_cast<std::size_t>(r * seq_len + j);
        batch.tokens[at] = t;
        t = pi[static_cast<std::size_t>(t)];
        batch.targets[at] = t;
      }
    }
    return batch;
  }

  DTW_CHECK_ARG(vocab >= kCharVocab,
                "token_batch: the corpus task needs vocab >= " << kCharVocab << ", got " << vocab);
  const std::vector<std::int32_t>& text = corpus_tokens();
  const auto length = static_cast<std::int64_t>(text.size());
  // A window needs seq_len + 1 characters: the inputs and, one further, the targets.
  DTW_CHECK_ARG(seq_len < length, "token_batch: seq_len "
                                      << seq_len << " must be below the corpus length " << length);
  const std::int64_t starts = length - seq_len;  // valid starts: [0, length - seq_len)
  for (std::int64_t r = 0; r < slice.count; ++r) {
    const std::int64_t g = slice.first + r;
    const std::int64_t start = index_below(hash_key(seed, kWindowTag, u64(step), u64(g)), starts);
    const auto from = text.begin() + start;
    const auto to = batch.tokens.begin() + r * seq_len;
    std::copy(from, from + seq_len, to);
    std::copy(from + 1, from + 1 + seq_len, batch.targets.begin() + r * seq_len);
  }
  return batch;
}

ClassBatch class_batch(std::uint64_t seed, std::int64_t step, std::int64_t global_batch,
                       std::int64_t features, std::int64_t classes, std::int64_t shard,
                       std::int64_t shards) {
  const Slice slice = check_sharding("class_batch", step, global_batch, shard, shards);
  DTW_CHECK_ARG(features >= 1, "class_batch: features " << features << " must be >= 1");
  DTW_CHECK_ARG(classes >= 2 && classes <= std::numeric_limits<std::int32_t>::max(),
                "class_batch: classes " << classes << " is outside [2, 2^31)");
  const auto nf = static_cast<std::size_t>(features);

  // The teacher: one random direction per class, scaled to unit length so that
  // no class wins most rows just by drawing a longer weight vector.
  std::vector<double> teacher(static_cast<std::size_t>(classes) * nf);
  for (std::int64_t c = 0; c < classes; ++c) {
    double* row = teacher.data() + static_cast<std::size_t>(c) * nf;
    double norm2 = 0;
    for (std::int64_t f = 0; f < features; ++f) {
      row[f] = normal(hash_key(seed, kTeacherTag, u64(c), u64(f)));
      norm2 += row[f] * row[f];
    }
    for (std::int64_t f = 0; f < features; ++f) row[f] /= std::sqrt(norm2);
  }

  ClassBatch batch;
  batch.rows = slice.count;
  batch.features = features;
  batch.inputs.resize(static_cast<std::size_t>(slice.count) * nf);
  batch.labels.resize(static_cast<std::size_t>(slice.count));
  const std::uint64_t input_key = hash_key(seed, kInputTag);  // hash_key takes four words
  for (std::int64_t r = 0; r < slice.count; ++r) {
    const std::int64_t g = slice.first + r;
    float* x = batch.inputs.data() + static_cast<std::size_t>(r) * nf;
    for (std::int64_t f = 0; f < features; ++f)
      x[f] = static_cast<float>(normal(hash_key(input_key, u64(step), u64(g), u64(f))));
    // Labels from the float inputs the model will see, so the task stays exactly learnable.
    std::int32_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < classes; ++c) {
      const double* row = teacher.data() + static_cast<std::size_t>(c) * nf;
      double score = 0;
      for (std::int64_t f = 0; f < features; ++f) score += row[f] * static_cast<double>(x[f]);
      if (score > best_score) {  // strict: ties go to the lower class
        best_score = score;
        best = static_cast<std::int32_t>(c);
      }
    }
    batch.labels[static_cast<std::size_t>(r)] = best;
  }
  return batch;
}

}  // namespace dtw::model
