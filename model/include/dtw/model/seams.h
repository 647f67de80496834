#pragma once
/// @file
/// Seams: the places in the GPT's forward and backward where a parallel
/// strategy puts its collectives, identity by default. The model calls them;
/// chapters 06 and 07 override them, so a tensor- or sequence-parallel rank
/// runs the model's own code on its shard (shard.h) with no second copy of
/// the block's chain.
///
/// One block, forward, with the four sites and what plugs in at each:
///
///     x ─ LN1 ─ enter(kAttention) ─ attention ─ leave(kAttention) ─ +bias ─ + ─ mid
///     │                                                                     │
///     └─────────────────────────────────────────────────────────────────────┘
///     mid ─ LN2 ─ enter(kMlp) ─ MLP ─ leave(kMlp) ─ +bias ─ + ─ x_out  (same residual)
///
///     embedding: wte lookup ─ leave(kEmbedding) ─ + wpe
///     head:      LNf ─ enter(kHead) ─ logits ─ vocab_max, vocab_sum ─ loss
///
/// Which collective plugs in at which seam is the lesson of the chapter that
/// overrides them (chapter 06: Megatron's f and g, and sequence parallelism's
/// all-gather and reduce-scatter; chapter 07: the attention cores), so this
/// file says only when the model calls each seam and what it may return.
///
/// Sizes may change at a seam (an all-gather makes more rows): a sublayer
/// runs on the rows `enter` returns, and `leave` must return as many rows as
/// the residual stream holds. Rows are always sequence-major (row b·T + t).
/// At the two ends the residual stream holds one row per token the forward
/// was given, unless the shard says its seams cut the sequence
/// (ModelShard::cut_by_seams, Megatron-SP's vocabulary-parallel ends): then
/// the embedding's `leave` turns the lookups of every token into the
/// shard's rows (a reduce-scatter), and the head's `enter` turns them back
/// into one row per token (an all-gather) before the logits.
/// A row-parallel projection's bias is added after `leave`, once, whatever
/// leave sums: that is why it is replicated and not sliced (shard.h).

#include <cstdint>
#include <span>
#include <vector>

#include "dtw/kernels/vector.h"
#include "dtw/model/attention_core.h"
#include "dtw/types.h"

namespace dtw::model {

/// Where in the model a seam is.
enum class Site {
  kEmbedding,  ///< after the token lookup (a vocabulary slice looks up only its own rows)
  kAttention,  ///< around the attention sublayer of a block
  kMlp,        ///< around the MLP sublayer of a block
  kHead,       ///< between the final norm and the logits
};

/// "embedding", "attention", "mlp", "head".
const char* name_of(Site site);

/// What a sublayer works on, as `Seams::enter` makes its input (see
/// Seams::sublayer_input).
struct SublayerInput {
  std::int64_t seq = 0;     ///< tokens of each sequence the sublayer sees: its rows are batch·seq
  bool new_buffer = false;  ///< enter writes the input to its buffer
  /// With new_buffer: the block does not keep that buffer for the backward.
  /// It drops it once the sublayer's forward is done and, in the backward,
  /// calls `enter` again on the norm's output it did keep, right after
  /// `leave_backward` (Megatron-SP gathers the input again: the sublayer's
  /// input is not charged, for one more collective per sublayer backward).
  bool enter_again = false;
};

/// The seams of one rank (see the file comment). Every method's default is
/// the identity; `layer` is the block (−1 for the embedding and the head).
/// `buffer` is the caller's, kept as long as the returned span is used: a
/// seam that changes the size writes its result there. It is a
/// kernels::Vector on the model's Place (a GPU's memory when the model runs
/// on one): resize it and hand its data() to Comm or to kernels, as a
/// std::vector's; every span a seam is given lives on that Place too.
template <TrainElement T>
class Seams {
 public:
  virtual ~Seams() = default;
  /// Forward, before a sublayer: x [rows, dim] is the norm's output; returns
  /// the sublayer's input (x itself, or a new value in `buffer`). When
  /// sublayer_input says `enter_again`, the backward calls it once more with
  /// the same x and must get the same values.
  virtual std::span<const T> enter(Site site, int layer, std::span<const T> x,
                                   kernels::Vector<T>& buffer);
  /// Forward, after a sublayer: y [rows, dim] is this rank's partial output
  /// (before any bias); returns what the residual stream adds (y, changed in
  /// place or not, or a new value in `buffer`).
  virtual std::span<const T> leave(Site site, int layer, std::span<T> y,
                                   kernels::Vector<T>& buffer);
  /// Backward of leave: dy is the gradient at what leave returned; returns the
  /// gradient at the sublayer's output.
  virtual std::span<const T> leave_backward(Site site, int layer, std::span<const T> dy,
                                            kernels::Vector<T>& buffer);
  /// Backward of enter: dx is this rank's partial gradient at the sublayer's
  /// input; returns the gradient at the norm's output.
  virtual std::span<const T> enter_backward(Site site, int layer, std::span<T> dx,
                                            kernels::Vector<T>& buffer);
  /// What `enter(site, ...)` hands a block's sublayer when the residual
  /// stream holds `seq` tokens of each sequence: how many tokens of each
  /// sequence it sees (the sublayer's caches, and the attention core's,
  /// are that long), whether it is a new buffer rather than x (the block
  /// then keeps it for the backward, BlockCache::attn_in and mlp_in) and
  /// whether the block drops that buffer and calls enter again instead.
  /// kAttention, kMlp and kHead are asked (for the head, `seq` is the
  /// stream's and the returned seq is not used: the head's input has one row
  /// per token). Gpt::activation_bytes counts from this,
  /// and block_forward checks it against what enter returns, so a seam that
  /// changes the rows must override both. Default: seq itself, x itself.
  virtual SublayerInput sublayer_input(Site site, std::int64_t seq) const {
    (void)site;
    return {seq, false};
  }
  /// The attention core every block uses (default: PlainAttention).
  virtual AttentionCore<T>& attention() { return plain_; }
  /// The loss over a vocabulary slice: turns each row's maximum of this
  /// rank's logits into the maximum over every slice (an allreduce max).
  virtual void vocab_max(std::span<T> row_max) { (void)row_max; }
  /// Turns per-row partial sums into sums over every slice (an allreduce
  /// sum): each row's Σ exp(logit − max) and its target's logit (0 on the
  /// slices that do not hold the target), 2·rows values in one call.
  virtual void vocab_sum(std::span<T> row_sums) { (void)row_sums; }

 private:
  PlainAttention<T> plain_;
};

/// The identity seams of a rank that holds the whole model.
template <TrainElement T>
Seams<T>& identity_seams();

}  // namespace dtw::model
