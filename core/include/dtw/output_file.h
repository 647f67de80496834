#pragma once
/// @file
/// Checking, before any work starts, that a program's output files can be
/// written, and writing them with every failure reported.

#include <string>
#include <string_view>
#include <vector>

namespace dtw {

/// Raises InvalidArgument naming `what` (e.g. "--out: the loss curve"), the
/// path and the reason unless a file can be written at `path`: its folder
/// exists and is writable, and `path` is not a folder. An existing file is
/// left as it is; a file the check had to create is removed again. Call it
/// where the option enters, so a run never computes for an hour and then
/// fails to save its result.
void check_writable(const std::string& path, std::string_view what);

/// One output file of a program and what names it, for check_distinct_outputs.
struct OutputPath {
  std::string path;  ///< the file; "" for an output not asked for (skipped)
  std::string what;  ///< the option that names it, e.g. "--json" or "--out (the loss plot)"
};

/// Raises InvalidArgument naming both options and both paths when two of
/// `outputs` are the same file, which the later write would silently replace
/// (`--out a --json a.csv` where --out writes a.csv). Paths are compared as
/// files, not as text: made absolute, symbolic links resolved where they
/// exist, "." and ".." removed, and an existing file reached by two names
/// (a hard link) is one file. List every file a program writes (a stem's
/// derived files one by one) and call it with check_writable, where the
/// options enter, before any work starts.
void check_distinct_outputs(const std::vector<OutputPath>& outputs);

/// Raises InvalidArgument naming `what`, the path and the reason unless files
/// can be written into the folder `dir`, making it if need be: `dir` is a
/// writable folder, or it does not exist and its nearest existing ancestor is
/// a writable folder. The filesystem is asked, not the mode bits: the missing
/// folders are made and a file is created in `dir`, then what the check made
/// is removed again (so /proc/x is refused, even for root). For an output
/// folder (a checkpoint), checked before any work starts; safe to call from
/// several ranks at once (then a folder one check made may stay: the run
/// that passed makes it anyway). A refused folder leaves nothing behind.
void check_folder_writable(const std::string& dir, std::string_view what);
/// Writes `contents` to `path`, replacing the file, and raises Error naming
/// `what`, the path and the reason when opening, writing or closing fails (a
/// full disk may show only at the close). A program says "wrote PATH" only
/// after this returned, so a failed write is never reported as a success.
void write_file(const std::string& path, std::string_view contents, std::string_view what);

}  // namespace dtw
