#pragma once
// The bytes of a sharded checkpoint (checkpoint.cpp): the index, a text file
// anyone can read, and one binary file per rank. Not a lab step.
//
//   index                     dtw-zero-checkpoint 1, the model and run, and per file:
//                             "file NAME bytes N checksum C ranges b:e,b:e,..."
//   shard-R-of-P-step-K.bin   header (magic, sizes), its ranges, then for each
//                             range its parameters and each optimizer moment
#include <cstdint>
#include <string>
#include <vector>

#include "dtw/train/replica.h"
#include "zero.h"

namespace dtw::ch04::ckpt {

/// One shard file as the index lists it.
struct FileEntry {
  std::string name;             ///< relative to the checkpoint folder
  std::int64_t bytes = 0;       ///< its length
  std::uint64_t checksum = 0;   ///< FNV-1a of its bytes
  std::vector<train::Range> ranges;  ///< what it holds, in order
};

/// The index: the run and its files.
struct Index {
  CheckpointInfo info;
  std::vector<FileEntry> files;
};

/// 64-bit FNV-1a of `bytes`.
std::uint64_t checksum(const std::vector<char>& bytes);
/// A hash of every tensor's name, shape and offset: two models with the same
/// size but another layout do not load into each other.
std::uint64_t layout_hash(const train::RunSpec& spec);
/// "shard-2-of-4-step-30.bin".
std::string shard_name(int rank, int ranks, std::int64_t steps_done);

/// The shard file of `replica`'s optimizer ranges (parameters and moments).
template <class T>
std::vector<char> encode_shard(train::Replica<T>& replica, int rank, int ranks,
                               std::int64_t steps_done);
/// A saved range and where its values start in the file, as byte offsets
/// into the shard file's bytes: parameters at `params`, moment k at
/// `moments[k]` (each range.size() values of T).
struct SavedRange {
  train::Range range;
  std::int64_t params = 0;
  std::vector<std::int64_t> moments;
};
/// The ranges of a shard file read whole into `bytes`, checked against its
/// header (InvalidArgument naming `path` and `rank` when they disagree).
std::vector<SavedRange> decode_shard(const std::vector<char>& bytes, int element_bytes,
                                     int moments, const std::string& path, int rank);

/// The index file's text, and back (InvalidArgument naming the path and the
/// line for anything malformed).
std::string format_index(const Index& index);
Index parse_index(const std::string& text, const std::string& path, int rank);
/// One FileEntry as its index line, and back.
std::string format_entry(const FileEntry& entry);
FileEntry parse_entry(const std::string& line, const std::string& path, int rank);

/// The whole file at `path` (InvalidArgument naming the rank and the path
/// when it cannot be read).
std::vector<char> read_file(const std::string& path, int rank);

}  // namespace dtw::ch04::ckpt
