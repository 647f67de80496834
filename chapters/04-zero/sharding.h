#pragma once
/// @file
/// Chapter 04: who owns what (Sharding) and what a ZeRO run is asked to do
/// (ZeroOptions), shared by every stage (zero.h includes this header).

#include <cstdint>
#include <string>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/model/units.h"
#include "dtw/train/replica.h"   // train::Range
#include "dtw/train/run_spec.h"
#include "dtw/train/strategy.h"  // train::Knobs

namespace dtw::ch04 {

/// Who owns what. Every unit u (model::model_units: the embedding, each
/// block, the head) is cut into p chunks by `Chunks(size of u, p)` — the first
/// size % p ranks get one element more — and rank r owns chunk r of every
/// unit: the reduced gradient, the optimizer state and (ZeRO-3) the only copy
/// of the parameters there. FSDP cuts its units the same way; cutting each
/// unit rather than the whole buffer means a unit can be gathered alone.
class Sharding {
 public:
  /// Shards `units` (which must tile [0, model_size) in order, without gaps
  /// or overlaps) over `ranks` ranks. InvalidArgument naming the first range
  /// left unowned or covered twice, or for ranks < 1.
  Sharding(std::vector<model::Unit> units, std::int64_t model_size, int ranks);
  /// The sharding of `spec`'s model over `ranks` ranks.
  static Sharding of(const train::RunSpec& spec, int ranks);

  /// p.
  int ranks() const { return ranks_; }
  /// The units, in forward order.
  const std::vector<model::Unit>& units() const { return units_; }
  /// Ψ, elements in the whole model.
  std::int64_t model_size() const { return model_size_; }
  /// Chunks(size of unit u, p).
  Chunks chunks(int unit) const;
  /// The flat range of unit u that `rank` owns.
  train::Range shard(int unit, int rank) const;
  /// Every shard of `rank`, in unit order (empty shards left out).
  std::vector<train::Range> owned(int rank) const;
  /// Elements `rank` owns: Σ over units of its chunk sizes.
  std::int64_t owned_elements(int rank) const;
  /// The unit whose range is exactly [begin, end) (what a GradReady reports);
  /// InvalidArgument when no unit is.
  int unit_of(std::int64_t begin, std::int64_t end) const;

 private:
  std::vector<model::Unit> units_;
  std::int64_t model_size_;
  int ranks_;
};

/// What a ZeRO run is asked to do: the strategy's stage and the knobs of
/// `dtw train --set key=value`.
struct ZeroOptions {
  int stage = 1;              ///< 1, 2 or 3
  int micro_batches = 1;      ///< knob micro_batches: gradient accumulation, m ≥ 1
  int prefetch = 0;           ///< knob prefetch: ZeRO-3 units gathered ahead, ≥ 0
  std::string save_dir;       ///< knob save: write a checkpoint to this folder ...
  std::int64_t save_after = 0;  ///< knob save_after: ... after this many steps (0: at the end)
  std::string resume_dir;     ///< knob resume: start from the checkpoint in this folder

  /// The options of stage `stage` from `knobs` (prefetch defaults to
  /// `default_prefetch`). InvalidArgument for `save=` or `resume=` given
  /// empty (a folder was meant; leaving the knob out means none).
  static ZeroOptions from_knobs(const train::Knobs& knobs, int stage, int default_prefetch = 0);
  /// The knobs a strategy of stage `stage` declares (train::Strategy::knobs):
  /// micro_batches, prefetch (stage 3 only, default `default_prefetch`),
  /// save, save_after and resume; from_knobs reads them, validate checks them.
  static std::vector<train::Knob> knobs(int stage, int default_prefetch = 0);
  /// InvalidArgument naming `rank` and the value for a stage outside 1..3,
  /// m < 1, a negative prefetch depth, prefetch without ZeRO-3, a save_after
  /// outside [0, spec.steps], a batch with fewer rows than ranks · m, or a
  /// save folder that cannot be made or written (dtw::check_folder_writable).
  /// Every rank calls it first (ZeroRun); the strategies' registrations call
  /// it before any rank runs (train::Strategy::check) with rank −1, which
  /// the messages then leave out.
  void validate(int rank, int ranks, const train::RunSpec& spec) const;
};

}  // namespace dtw::ch04
