#pragma once
/// @file
/// Batches by token range: what a sequence-parallel rank (chapter 07) trains
/// on. Every sequence of the rows is cut the way the shard says (model/shard.h:
/// contiguous, or zig-zag so that causal attention's work is balanced), and
/// the rank keeps its tokens of every row, in local order.

#include "dtw/model/shard.h"
#include "dtw/train/run_spec.h"

namespace dtw::train {

/// The part of `rows` (a GPT batch, make_batch) that sequence shard `shard`
/// holds: seq_len becomes the shard's tokens per sequence, tokens and targets
/// keep the positions shard.positions(rows.seq_len) of every row, and weight
/// is multiplied by the shard's share of the tokens (every token's loss
/// counts), so Σ over shards of weight × the shard's mean loss is the rows'
/// weighted loss. Only token ids are copied: each shard's activations are its
/// own contiguous rows. InvalidArgument for an MLP batch or a sequence that
/// does not cut evenly.
Batch sequence_shard_of(const Batch& rows, const model::ModelShard& shard);

}  // namespace dtw::train
