// Sharded checkpoints that reshard.
//
// A ZeRO rank holds no copy of the whole model state, so no rank can write
// it: each rank writes what it owns (the parameters and optimizer moments of
// its shards) and one small index says which file holds which ranges. A
// checkpoint of a 70B-parameter model written by 1024 ranks is 1024 files
// written at once; gathering it on rank 0 first would need one node to hold
// it all, which is what sharding was for (PyTorch's Distributed Checkpoint
// works the same way).
//
// Loading is where resharding happens. A rank of the new run, with any
// number of ranks and any stage, holds some ranges (ZeRO-3: its shards;
// ZeRO-1/2: every parameter). Each of them is assembled from the overlapping
// pieces of the saved shards:
//
//   saved on 4 ranks:   | f0 | f1 | f2 | f3 |       (one unit, four files)
//   held on 3 ranks:    |  r0  |  r1  |  r2  |
//   r1 reads            the tail of f1 and the head of f2
//
// Nothing else changes when the world changes: Adam's moments are
// element-wise, so a moment is the same number whoever owns its element.
//
// Writing is atomic: every file goes to a temporary name and is renamed into
// place, the index last. A crash halfway leaves the previous index, which
// names the previous step's files (the names carry the step), whole.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "checkpoint_io.h"
#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "dtw/results.h"
#include "zero.h"

namespace dtw::ch04 {
namespace {

// Writes `bytes` to `path` so that `path` is either absent, the old file, or
// the whole new file, never a part of it.
void write_atomically(const std::string& path, const char* bytes, std::size_t n, int rank) {
  // @lab 04.5: Write to a temporary file next to `path`, close it, then rename it onto `path`.
  // @hint 1: Atomic: a reader, or a run resumed after a crash, sees the old file
  // @hint 1: or the whole new one, never half of it. Writing in place can't
  // @hint 1: promise that; replacing a finished file in one step can.
  // @hint 2: write all the bytes to a temporary name in the same folder; close;
  // @hint 2: fail with the rank and the path if the write did not succeed (a full
  // @hint 2: disk); rename the temporary onto `path`. Trap: the temporary must
  // @hint 2: differ from `path` (a rename of a path onto itself does nothing).
  // @hint 3: std::ofstream out(path + ".tmp", std::ios::binary | std::ios::trunc);
  // @hint 3: out.write(bytes, n); out.close(); DTW_CHECK_ARG(out.good(), ...);
  // @hint 3: std::filesystem::rename(tmp, path, ec), and DTW_CHECK(!ec, Error, ...).
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(bytes, static_cast<std::streamsize>(n));
  out.close();
  DTW_CHECK_ARG(out.good(), "rank " << rank << ": could not write checkpoint file " << tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  DTW_CHECK(!ec, Error, "rank " << rank << ": could not rename " << tmp << " to " << path << ": "
                                << ec.message());
  // @end
}

}  // namespace

template <TrainElement T>
void save_checkpoint(Comm& comm, train::Replica<T>& replica, const std::string& dir,
                     std::int64_t steps_done, std::span<const double> losses) {
  const int r = comm.rank(), p = comm.size();
  if (r == 0) {
    // Checked before the run (ZeroOptions::validate), but the folder may have
    // changed since: a dtw error naming the rank and the path, not a crash.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    DTW_CHECK(!ec && std::filesystem::is_directory(dir), Error,
              "rank " << r << ": cannot make the checkpoint folder " << dir << ": "
                      << (ec ? ec.message() : "it exists and is not a folder"));
  }
  ch01::barrier(comm);  // the folder exists before anyone writes into it
  // @lab 04.5: Write this rank's shard file atomically, then let rank 0 write the index of every rank's file, last; nobody returns before the index exists.
  // @hint 1: Each rank writes what it owns; one small index, written after every
  // @hint 1: shard file, says which file holds which ranges, so a checkpoint
  // @hint 1: exists only once all of it does.
  // @hint 2: bytes = this rank's shard encoded; write it atomically under its name;
  // @hint 2: gather every rank's file entry on rank 0; rank 0 builds the index
  // @hint 2: (info + entries) and writes it atomically; a barrier at the end.
  // @hint 2: Trap: the index before a shard file is a checkpoint naming a file
  // @hint 2: that may not exist yet.
  // @hint 3: ckpt::encode_shard(replica, r, p, steps_done); ckpt::FileEntry{ckpt::shard_name(r,
  // @hint 3: p, steps_done), size, ckpt::checksum(bytes), replica.plan().optimizer};
  // @hint 3: write_atomically; gather_results(comm, ckpt::format_entry(mine)); on rank 0
  // @hint 3: ckpt::Index with parse_entry of each, ckpt::format_index; ch01::barrier(comm).
  const std::vector<char> bytes = ckpt::encode_shard(replica, r, p, steps_done);
  const ckpt::FileEntry mine{ckpt::shard_name(r, p, steps_done),
                             static_cast<std::int64_t>(bytes.size()), ckpt::checksum(bytes),
                             replica.plan().optimizer};
  write_atomically(dir + "/" + mine.name, bytes.data(), bytes.size(), r);
  // Rank 0 learns what every rank wrote, then writes the index: the last file,
  // so the checkpoint exists only once every shard does.
  const std::vector<std::string> entries = gather_results(comm, ckpt::format_entry(mine));
  if (r == 0) {
    ckpt::Index index;
    index.info = {replica.spec().model, replica.model_size(), ckpt::layout_hash(replica.spec()),
                  static_cast<int>(sizeof(T)), replica.optimizer_moments(), p, steps_done,
                  std::vector<double>(losses.begin(), losses.begin() + steps_done)};
    for (const std::string& e : entries) index.files.push_back(ckpt::parse_entry(e, dir, r));
    const std::string text = ckpt::format_index(index);
    write_atomically(dir + "/index", text.data(), text.size(), r);
  }
  ch01::barrier(comm);  // nobody goes on (or loads) before the index is there
  // @end
}

template <TrainElement T>
CheckpointInfo load_checkpoint(Comm& comm, train::Replica<T>& replica, const std::string& dir) {
  const int r = comm.rank();
  const std::string index_path = dir + "/index";
  const std::vector<char> text = ckpt::read_file(index_path, r);
  const ckpt::Index index = ckpt::parse_index(std::string(text.begin(), text.end()), index_path, r);
  const CheckpointInfo& info = index.info;
  // A checkpoint of another model, precision or optimizer is refused whole.
  DTW_CHECK_ARG(info.model == replica.spec().model && info.model_size == replica.model_size() &&
                    info.layout_hash == ckpt::layout_hash(replica.spec()),
                "rank " << r << ": checkpoint " << dir << " was written for " << info.model << " (Ψ = "
                        << info.model_size << "); this run trains " << replica.spec().model
                        << " (Ψ = " << replica.model_size() << ")");
  DTW_CHECK_ARG(info.element_bytes == static_cast<int>(sizeof(T)) &&
                    info.moments == replica.optimizer_moments(),
                "rank " << r << ": checkpoint " << dir << " holds " << info.element_bytes
                        << "-byte values and " << info.moments << " optimizer moments; this run uses "
                        << sizeof(T) << " and " << replica.optimizer_moments());
  std::int64_t filled = 0;  // elements of parameters and moments copied
  for (const ckpt::FileEntry& file : index.files) {
    const std::string path = dir + "/" + file.name;
    const std::vector<char> bytes = ckpt::read_file(path, r);
    DTW_CHECK_ARG(static_cast<std::int64_t>(bytes.size()) == file.bytes,
                  "rank " << r << ": checkpoint file " << path << " is " << bytes.size()
                          << " bytes; the index says " << file.bytes << " (truncated?)");
    DTW_CHECK_ARG(ckpt::checksum(bytes) == file.checksum,
                  "rank " << r << ": checkpoint file " << path << " does not match its checksum");
    const std::vector<ckpt::SavedRange> saved =
        ckpt::decode_shard(bytes, info.element_bytes, info.moments, path, r);
    // @lab 04.5: Copy the overlap of every saved range with every range this replica holds: parameters into its parameter ranges, moments into its optimizer ranges; count the elements in `filled`.
    // @hint 1: Resharding: every range this rank holds now is assembled from the
    // @hint 1: pieces of the saved shards that overlap it, whatever the world and
    // @hint 1: the stage that saved them; a moment is the same number whoever owns it.
    // @hint 2: for each saved range s, each held range h: lo = max of the begins,
    // @hint 2: hi = min of the ends; if lo < hi copy [lo, hi). Its values sit in the
    // @hint 2: file at s's offset + (lo − s.begin) elements (not lo − h.begin). Do it
    // @hint 2: for the parameters (held: plan().params) and for EVERY moment (held:
    // @hint 2: plan().optimizer); filled += hi − lo per copy.
    // @hint 3: std::memcpy(replica.params(lo, hi).data(), bytes.data() + s.params +
    // @hint 3: (lo − s.range.begin)·sizeof(T), (hi − lo)·sizeof(T)); moments: s.moments[k]
    // @hint 3: into replica.optimizer_state(k, lo, hi) for k < info.moments.
    auto copy = [&](std::int64_t from, const train::Range& s, std::int64_t lo, std::int64_t hi,
                    std::span<T> to) {
      std::memcpy(to.data(), bytes.data() + from + (lo - s.begin) * sizeof(T),
                  static_cast<std::size_t>(hi - lo) * sizeof(T));
      filled += hi - lo;
    };
    for (const ckpt::SavedRange& s : saved) {
      for (const train::Range& h : replica.plan().params) {
        const std::int64_t lo = std::max(s.range.begin, h.begin), hi = std::min(s.range.end, h.end);
        if (lo < hi) copy(s.params, s.range, lo, hi, replica.params(lo, hi));
      }
      for (const train::Range& h : replica.plan().optimizer) {
        const std::int64_t lo = std::max(s.range.begin, h.begin), hi = std::min(s.range.end, h.end);
        for (int k = 0; lo < hi && k < info.moments; ++k)
          copy(s.moments[static_cast<std::size_t>(k)], s.range, lo, hi, replica.optimizer_state(k, lo, hi));
      }
    }
    // @end
  }
  // Every element held must have come from some file exactly once.
  std::int64_t held = 0;
  for (const train::Range& h : replica.plan().params) held += h.size();
  for (const train::Range& h : replica.plan().optimizer) held += h.size() * info.moments;
  DTW_CHECK_ARG(filled == held, "rank " << r << ": checkpoint " << dir << " covers " << filled
                                        << " of the " << held
                                        << " values this rank holds: a shard file is missing, or not every overlap of a saved "
                                           "range with a held one was copied (parameters, and each moment)");
  return info;
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void save_checkpoint<T>(Comm&, train::Replica<T>&, const std::string&, std::int64_t, \
                                   std::span<const double>);                                     \
  template CheckpointInfo load_checkpoint<T>(Comm&, train::Replica<T>&, const std::string&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch04
