#pragma once
/// @file
/// Training data: a character tokenizer, a synthetic task, a small text
/// corpus, and the sampler that gives each data-parallel rank its shard.
///
/// Reproducibility is the point. Sample g (0 ≤ g < global_batch) of step s is
/// a pure function of (seed, s, g), and rank r of D receives samples
/// [r·B/D, (r+1)·B/D) in order, so the shards of D ranks concatenated are
/// exactly the batch a single-device run sees at that step.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtw::model {

/// Size of the character vocabulary: '\n' plus the 95 printable ASCII characters.
inline constexpr std::int64_t kCharVocab = 96;
/// Characters to token ids: '\n' is 0, printable ASCII ' '..'~' are 1..95.
/// Any other byte raises InvalidArgument naming its offset and value.
std::vector<std::int32_t> encode(std::string_view text);
/// The inverse of encode; an id outside [0, kCharVocab) raises InvalidArgument.
std::string decode(const std::vector<std::int32_t>& ids);

/// The built-in corpus (English prose about distributed training, written for
/// dtw, a few tens of KiB), as text.
std::string_view corpus_text();

/// A batch of next-token examples: `tokens` and `targets` are
/// [sequences, seq_len] row-major; targets[i][t] is the token after tokens[i][t].
struct TokenBatch {
  std::int64_t sequences = 0;        ///< rows: this shard's share, global_batch / shards
  std::int64_t seq_len = 0;          ///< tokens per sequence
  std::vector<std::int32_t> tokens;   ///< inputs [sequences, seq_len], ids in [0, vocab)
  std::vector<std::int32_t> targets;  ///< [sequences, seq_len]: tokens shifted left by one
};

/// Where sequences come from.
enum class TokenTask {
  /// Random start token, then a fixed random permutation π of the vocabulary
  /// drawn from the seed: t[i+1] = π(t[i]). A model that learns π reaches
  /// loss ≈ 0; an untrained one starts near ln(vocab).
  kSynthetic,
  /// Windows of the built-in corpus at positions drawn from the seed.
  kCorpus,
};

/// Parses "synthetic" or "corpus" (InvalidArgument listing both otherwise).
TokenTask token_task_from_name(std::string_view name);

/// Rank `shard` of `shards` (data-parallel ranks) receives its part of step
/// `step`'s global batch of `global_batch` sequences of `seq_len` tokens over
/// a vocabulary of `vocab` ids (kCorpus needs vocab ≥ kCharVocab).
/// global_batch must be divisible by shards; any bad value raises
/// InvalidArgument naming the values.
TokenBatch token_batch(TokenTask task, std::uint64_t seed, std::int64_t step,
                       std::int64_t global_batch, std::int64_t seq_len, std::int64_t vocab,
                       std::int64_t shard = 0, std::int64_t shards = 1);

/// A batch for the MLP: `inputs` is [rows, features] drawn from N(0, 1), and
/// `labels[i]` = argmax of a fixed random linear "teacher" (from the seed)
/// applied to inputs[i], so the task is learnable exactly.
struct ClassBatch {
  std::int64_t rows = 0;             ///< examples: this shard's share, global_batch / shards
  std::int64_t features = 0;         ///< input width
  std::vector<float> inputs;         ///< [rows, features] row-major, N(0, 1)
  std::vector<std::int32_t> labels;  ///< [rows], class ids in [0, classes)
};

/// The MLP's synthetic classification task, sharded like token_batch.
ClassBatch class_batch(std::uint64_t seed, std::int64_t step, std::int64_t global_batch,
                       std::int64_t features, std::int64_t classes, std::int64_t shard = 0,
                       std::int64_t shards = 1);

}  // namespace dtw::model
