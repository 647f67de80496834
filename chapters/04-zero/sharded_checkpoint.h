#pragma once
/// @file
/// Chapter 04, step 04.5: sharded checkpoints that reshard. No rank of a
/// ZeRO-3 run holds the whole model, so each rank saves what it owns -- the
/// parameters and optimizer moments of its shards -- and a load assembles
/// whatever a rank holds from the pieces of any number of saved shards, so a
/// run saved on p ranks resumes on any other number. It takes a communicator
/// and a Replica, whatever that Replica holds, and nothing of ZeRO's own types
/// (zero.h includes this header).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/train/replica.h"
#include "dtw/types.h"

namespace dtw::ch04 {

/// What a checkpoint's index says.
struct CheckpointInfo {
  std::string model;           ///< the model's name
  std::int64_t model_size = 0;  ///< Ψ
  std::uint64_t layout_hash = 0;  ///< names, shapes and offsets of every tensor
  int element_bytes = 0;        ///< 4 (float) or 8 (double)
  int moments = 0;              ///< optimizer moments per element (AdamW 2, SGD 1)
  int ranks = 0;                ///< how many ranks wrote it
  std::int64_t steps_done = 0;  ///< optimizer steps taken before it was written
  std::vector<double> losses;   ///< the global loss of each of those steps
};

/// Collective: every rank writes the parameters and optimizer moments of its
/// optimizer ranges (its shards) to `dir`/shard-R-of-P-step-K.bin, then rank 0
/// writes `dir`/index (model, sizes, every file with its ranges, length and
/// checksum, the losses so far). Every file is written to a temporary name
/// and renamed, the index last, so an interrupted save leaves the previous
/// checkpoint intact. Returns when all files are in place.
template <TrainElement T>
void save_checkpoint(Comm& comm, train::Replica<T>& replica, const std::string& dir,
                     std::int64_t steps_done, std::span<const double> losses);

/// Fills whatever `replica` holds — parameters of its parameter ranges,
/// moments of its optimizer ranges — from the checkpoint in `dir`, written by
/// any number of ranks with any sharding: each range is assembled from the
/// overlapping pieces of the saved shards. Needs no communication. Throws
/// InvalidArgument naming the rank and the file for a missing or truncated
/// file, a checksum that does not match, a checkpoint of another model,
/// dtype or optimizer, or a range no file covers.
template <TrainElement T>
CheckpointInfo load_checkpoint(Comm& comm, train::Replica<T>& replica, const std::string& dir);

}  // namespace dtw::ch04
