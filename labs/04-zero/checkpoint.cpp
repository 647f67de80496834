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
  DTW_TODO("04.5: Write to a temporary file next to `path`, close it, then rename it onto `path`.");
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
  DTW_TODO("04.5: Write this rank's shard file atomically, then let rank 0 write the index of every rank's file, last; nobody returns before the index exists.");
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
    DTW_TODO("04.5: Copy the overlap of every saved range with every range this replica holds: parameters into its parameter ranges, moments into its optimizer ranges; count the elements in `filled`.");
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
