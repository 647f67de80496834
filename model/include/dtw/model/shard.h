#pragma once
/// @file
/// What one rank computes of the GPT: its share of the heads, of the MLP's
/// hidden units, of the vocabulary and of the tokens of each sequence.
///
/// The whole model is the shard that holds everything. A tensor-parallel rank
/// (chapter 06) holds heads [h0, h1), hidden units [f0, f1) and vocabulary
/// rows [v0, v1); a sequence-parallel rank (chapter 07) holds a token range
/// of every sequence, contiguous or zig-zag. `Gpt<T>(config, shard)` runs the
/// model's own forward and backward on that share, with the local tensors laid
/// out by `param_layout(config, shard)`:
///
///     tensor                shape on the shard      slice of the whole tensor
///     wte, head.weight      [v1−v0, C]              rows [v0, v1)
///     attn.qkv.weight       [3·(h1−h0)·D, C]        rows [h0·D, h1·D) of each of q, k, v
///     attn.qkv.bias         [3·(h1−h0)·D]           the same rows
///     attn.proj.weight      [C, (h1−h0)·D]          columns [h0·D, h1·D)
///     mlp.fc.weight         [f1−f0, C]              rows [f0, f1)
///     mlp.fc.bias           [f1−f0]                 the same rows
///     mlp.proj.weight       [C, f1−f0]              columns [f0, f1)
///     everything else       whole                   (replicated over the slices)
///
/// Every view of the shard's layout carries its TensorSlice, so initialisation,
/// the optimizer and the comparison with the reference find each local
/// element's place in the whole model without computing offsets by hand.

#include <cstdint>
#include <string>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/model/params.h"

namespace dtw::model {

/// [begin, end) of a dimension; end < 0 means "to the end" (the whole dimension).
struct IndexRange {
  std::int64_t begin = 0;  ///< first index
  std::int64_t end = -1;   ///< one past the last; −1: the whole extent
  /// The range with end resolved against `extent`.
  IndexRange resolved(std::int64_t extent) const { return {begin, end < 0 ? extent : end}; }
};

/// How a sequence is cut into s shards.
enum class SequenceSplit {
  /// Shard r holds tokens [r·T/s, (r+1)·T/s): simple, but under a causal mask
  /// the last shard has s times the first one's attention work.
  kContiguous,
  /// The sequence is cut into 2s chunks and shard r holds chunks r and
  /// 2s−1−r: every shard gets one early and one late chunk, so the causal
  /// work is balanced (the load-balanced ring attention of the literature).
  kZigZag,
};

/// Global positions of a shard's tokens, as runs [begin, end) in local order:
/// local token t of every sequence sits at the t-th position the runs list.
struct TokenRuns {
  std::vector<IndexRange> runs;  ///< resolved ranges, in local order
  /// Tokens held (Σ of the runs' lengths).
  std::int64_t size() const;
  /// The global position of local token t.
  std::int64_t position(std::int64_t t) const;
  /// True when the runs are exactly [0, size()): the whole sequence.
  bool whole() const;
};

/// A rank's share of the GPT (see the file comment).
struct ModelShard {
  IndexRange heads;   ///< attention heads held (all by default)
  IndexRange hidden;  ///< MLP hidden units held
  IndexRange vocab;   ///< vocabulary rows of wte (and head.weight) held
  int sequence_shard = 0;   ///< this shard's index along the sequence
  int sequence_shards = 1;  ///< how many shards each sequence is cut into
  SequenceSplit split = SequenceSplit::kContiguous;  ///< how the sequence is cut
  /// The forward is given whole sequences and the seams cut them: the
  /// embedding's Seams::leave keeps this shard's tokens of the residual
  /// stream and the head's Seams::enter gathers every shard's back
  /// (Megatron-SP with vocabulary-parallel ends). False: the forward is
  /// given only this shard's tokens, and every layer sees those.
  bool cut_by_seams = false;

  /// Everything: the whole model.
  static ModelShard whole() { return {}; }
  /// Slice r of t of heads, hidden units and vocabulary (Megatron's
  /// tensor-parallel rank r of t): equal parts, InvalidArgument when heads,
  /// mlp_hidden or vocab do not divide by t.
  static ModelShard tensor_slice(const ModelConfig& config, int r, int t);
  /// Sequence shard r of s, split as `split`.
  static ModelShard sequence(int r, int s, SequenceSplit split);

  /// InvalidArgument naming the field and the values when a range is empty or
  /// outside the model's extents, or the sequence shard is out of range.
  void validate(const ModelConfig& config) const;
  /// True when nothing is cut: heads, hidden units and vocabulary whole and
  /// one sequence shard.
  bool is_whole(const ModelConfig& config) const;
  /// True when the parameters are the whole model's (sequence shards hold
  /// every parameter).
  bool holds_every_parameter(const ModelConfig& config) const;
  /// The positions of this shard's tokens when each whole sequence has
  /// `seq_len` tokens; InvalidArgument when seq_len does not divide into the
  /// shards (s parts, or 2s chunks for zig-zag).
  TokenRuns positions(std::int64_t seq_len) const;
  /// "heads [0, 2) hidden [0, 128) vocab [0, 48) tokens 1/2 zig-zag".
  std::string describe(const ModelConfig& config) const;
};

/// The layout of `shard`'s local tensors (the table in the file comment), in
/// the whole layout's order with the same names; each view's slice says where
/// it sits in the whole tensor. param_layout(config, ModelShard::whole()) is
/// param_layout(config). Only a GPT can be cut (InvalidArgument otherwise).
ParamLayout param_layout(const ModelConfig& config, const ModelShard& shard);

}  // namespace dtw::model
