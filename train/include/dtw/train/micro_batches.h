#pragma once
/// @file
/// The micro-batch rule: which rows of a step's global batch data-parallel
/// rank r trains on as its k-th of m micro-batches. One rule for every
/// strategy that accumulates micro-batches (ZeRO's, a pipeline's, a hybrid
/// run's data-parallel replicas), so their rows agree with the reference.
///
/// The batch is cut into dp·m contiguous shards (shard_rows); rank r takes
/// the m consecutive shards r·m … r·m + m − 1:
///
///     B = 8, dp = 2, m = 2:   rows 0-1 | 2-3 | 4-5 | 6-7
///                             r0 k0    r0 k1 r1 k0  r1 k1
///
/// Why that order: shard s of dp·m is the s-th contiguous run of the batch's
/// rows, so the shards in index order concatenate to the whole batch, and
/// with r·m + k that index order is rank by rank, micro-batch by micro-batch.
/// Every row is therefore trained exactly once per step, by one rank, and
/// rank r's m micro-batches together are its data-parallel shard (rows of
/// shard r of dp when the batch divides). Each micro-batch carries its rows'
/// share of the global batch as its weight (Batch::weight), so the weighted
/// sum of all dp·m micro-batch losses is the reference's mean, whether or not
/// the batch divides. (Chapter 02 derives the same rule, micro_batch_shards,
/// as a lab step.)

#include <cstdint>

#include "dtw/errors.h"
#include "dtw/train/run_spec.h"

namespace dtw::train {

/// Shard `shard` of `shards`: what make_batch and Replica::forward_backward take.
struct MicroBatchShard {
  std::int64_t shard = 0;   ///< r·m + k
  std::int64_t shards = 1;  ///< dp·m
};

/// The shard data-parallel rank `dp_rank` of `dp_size` trains as its
/// micro-batch `k` of `m`: r·m + k of dp·m. InvalidArgument naming the rank
/// and the values unless 0 ≤ dp_rank < dp_size and 0 ≤ k < m.
inline MicroBatchShard micro_batch_shard(int dp_rank, int dp_size, int k, int m) {
  DTW_CHECK_ARG(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size,
                "rank " << dp_rank << " is outside a data-parallel group of " << dp_size);
  DTW_CHECK_ARG(m >= 1 && k >= 0 && k < m, "rank " << dp_rank << ": micro-batch " << k
                                                   << " is outside [0, " << m << ")");
  return {static_cast<std::int64_t>(dp_rank) * m + k, static_cast<std::int64_t>(dp_size) * m};
}

/// Step `step`'s micro-batch `k` of `m` on data-parallel rank `dp_rank` of
/// `dp_size`: make_batch of micro_batch_shard's shard, with its weight (its
/// rows / the global batch). InvalidArgument as micro_batch_shard, and as
/// make_batch when dp·m exceeds the batch's rows.
inline Batch micro_batch(const RunSpec& spec, std::int64_t step, int dp_rank, int dp_size, int k,
                         int m) {
  const MicroBatchShard s = micro_batch_shard(dp_rank, dp_size, k, m);
  return make_batch(spec, step, s.shard, s.shards);
}

}  // namespace dtw::train
