// Who owns what, and what a ZeRO run was asked to do.
//
// Each unit of the model is cut into p chunks with chapter 01's Chunks, so a
// unit of n elements gives its first n % p ranks one element more:
//
//   unit h.0, n = 10, p = 4:   [ r0 r0 r0 | r1 r1 r1 | r2 r2 | r3 r3 ]
//   unit h.1, n = 6,  p = 4:   [ r0 r0 | r1 r1 | r2 | r3 ]
//
// Rank r owns chunk r of every unit. That is exactly the layout chapter 01's
// reduce_scatter leaves and allgather_in_place expects, so no shard is ever
// padded or copied to move: the collectives work on the unit's own memory.
// (FSDP pads each unit to a multiple of p instead, because NCCL's allgather
// wants equal blocks; our ring takes chunks of any size.)
#include <sstream>

#include "dtw/errors.h"
#include "dtw/output_file.h"
#include "dtw/model/params.h"
#include "zero.h"

namespace dtw::ch04 {

Sharding::Sharding(std::vector<model::Unit> units, std::int64_t model_size, int ranks)
    : units_(std::move(units)), model_size_(model_size), ranks_(ranks) {
  DTW_CHECK_ARG(ranks >= 1, "Sharding: " << ranks << " ranks; need at least 1");
  // The units must tile the model: a gap would be parameters nobody steps, an
  // overlap parameters two ranks step (and two gathers disagree about).
  std::int64_t next = 0;
  for (const model::Unit& u : units_) {
    DTW_CHECK_ARG(u.begin <= next, "Sharding: the unit plan leaves [" << next << ", " << u.begin
                                                                     << ") unowned (before unit "
                                                                     << u.name << ")");
    DTW_CHECK_ARG(u.begin == next && u.end >= u.begin,
                  "Sharding: unit " << u.name << " [" << u.begin << ", " << u.end
                                    << ") overlaps the units before it, which end at " << next);
    next = u.end;
  }
  DTW_CHECK_ARG(next == model_size, "Sharding: the unit plan leaves ["
                                        << next << ", " << model_size
                                        << ") unowned (the model has " << model_size
                                        << " parameters)");
}

Sharding Sharding::of(const train::RunSpec& spec, int ranks) {
  const model::ModelConfig config = spec.config();
  const model::ParamLayout layout = model::param_layout(config);
  return Sharding(model::model_units(config, layout), layout.size(), ranks);
}

Chunks Sharding::chunks(int unit) const {
  return Chunks(units_.at(static_cast<std::size_t>(unit)).size(), ranks_);
}

train::Range Sharding::shard(int unit, int rank) const {
  // @lab 04.1: Return the flat range of unit `unit` that `rank` owns: its chunk, placed at the unit's start.
  // @hint 1: Rank r owns chunk r of every unit, cut the way chapter 01's ring
  // @hint 1: cuts a buffer: the first n % p ranks get one element more.
  // @hint 2: begin = the unit's first element + where chunk r starts inside the
  // @hint 2: unit; end = begin + the chunk's size. Trap: with uneven chunks,
  // @hint 2: chunk r does not start at r times its own size.
  // @hint 3: const Chunks c = chunks(unit); begin = units_[unit].begin + c.offset(rank);
  // @hint 3: return {begin, begin + c.size(rank)}.
  const Chunks c = chunks(unit);
  const std::int64_t begin = units_[static_cast<std::size_t>(unit)].begin + c.offset(rank);
  return {begin, begin + c.size(rank)};
  // @end
}

std::vector<train::Range> Sharding::owned(int rank) const {
  std::vector<train::Range> out;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u)
    if (shard(u, rank).size() > 0) out.push_back(shard(u, rank));
  return out;
}

std::int64_t Sharding::owned_elements(int rank) const {
  std::int64_t n = 0;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) n += shard(u, rank).size();
  return n;
}

int Sharding::unit_of(std::int64_t begin, std::int64_t end) const {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u)
    if (units_[static_cast<std::size_t>(u)].begin == begin && units_[static_cast<std::size_t>(u)].end == end) return u;
  DTW_CHECK_ARG(false, "Sharding: [" << begin << ", " << end << ") is not a unit");
  return -1;
}

std::vector<train::Knob> ZeroOptions::knobs(int stage, int default_prefetch) {
  // Declared beside from_knobs, which reads them, so the two agree.
  std::vector<train::Knob> k = {
      {.name = "micro_batches", .default_value = "1", .help = "micro-batches per step (>= 1)"}};
  if (stage == 3)
    k.push_back({.name = "prefetch",
                 .default_value = std::to_string(default_prefetch),
                 .help = "units gathered ahead of the one computing (>= 0)"});
  k.push_back({.name = "save",
               .default_value = "none",
               .help = "write a sharded checkpoint to this folder"});
  k.push_back({.name = "save_after",
               .default_value = "0",
               .help = "with save: write it after this many steps (0: at the end)"});
  k.push_back({.name = "resume",
               .default_value = "none",
               .help = "start from the checkpoint in this folder"});
  return k;
}

ZeroOptions ZeroOptions::from_knobs(const train::Knobs& knobs, int stage, int default_prefetch) {
  ZeroOptions o;
  o.stage = stage;
  o.micro_batches = static_cast<int>(knobs.get_int("micro_batches", 1));
  o.prefetch = static_cast<int>(knobs.get_int("prefetch", default_prefetch));
  // An empty folder given (--set save=) is a mistake, not "no checkpoint":
  // leaving the knob out says that.
  for (const char* knob : {"save", "resume"})
    DTW_CHECK_ARG(!knobs.has(knob) || !knobs.get(knob, "").empty(),
                  "ZeRO: " << knob << "= names no folder; give one (--set " << knob
                           << "=DIR), or leave the knob out for " << (knob[0] == 's' ? "no checkpoint" : "a fresh start"));
  o.save_dir = knobs.get("save", "");
  o.save_after = knobs.get_int("save_after", 0);
  o.resume_dir = knobs.get("resume", "");
  return o;
}

void ZeroOptions::validate(int rank, int ranks, const train::RunSpec& spec) const {
  // Every rank checks before any message, so bad options never hang a run.
  const std::string who = (rank >= 0 ? "rank " + std::to_string(rank) + ": " : "") + "ZeRO: ";
  DTW_CHECK_ARG(stage >= 1 && stage <= 3, who << "stage " << stage << " is not 1, 2 or 3");
  DTW_CHECK_ARG(micro_batches >= 1, who << "micro_batches " << micro_batches << " must be at least 1");
  DTW_CHECK_ARG(prefetch >= 0, who << "prefetch depth " << prefetch << " must not be negative");
  DTW_CHECK_ARG(prefetch == 0 || stage == 3,
                who << "prefetch " << prefetch << " gathers parameters ahead, which only stage 3 "
                    << "gathers; stage " << stage << " holds them all");
  DTW_CHECK_ARG(save_after >= 0 && save_after <= spec.steps,
                who << "save_after " << save_after << " is outside [0, " << spec.steps << "] steps");
  // The checkpoint's folder is checked before any step, not after the last.
  if (!save_dir.empty()) check_folder_writable(save_dir, who + "save=" + save_dir);
  const std::int64_t shards = static_cast<std::int64_t>(ranks) * micro_batches;
  DTW_CHECK_ARG(spec.batch >= shards, who << "a global batch of " << spec.batch << " rows cannot be split over "
                                          << ranks << " ranks x " << micro_batches
                                          << " micro-batches (" << shards << " shards)");
}

}  // namespace dtw::ch04
