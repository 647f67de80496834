#pragma once
// The dtw program's one exit-code convention, shown by `dtw --help`. Every
// subcommand and every benchmark program (bench_main.h) returns one of these; a child program's own status is decoded
// and reported, never passed through as if it were dtw's.
#include <exception>
#include <string>

#include "dtw/errors.h"

namespace dtw::cli {

inline constexpr int kExitOk = 0;           // everything ran and every check passed
inline constexpr int kExitCheckFailed = 1;  // it ran, but a check failed (a test, a result)
inline constexpr int kExitUsage = 2;        // bad usage: unknown option, value out of range, bad path
inline constexpr int kExitRunFailed = 3;    // a run failed: an error, a deadlock, a child that died

// What a command line prints for an error: a usage error (InvalidArgument
// raised before any rank ran) as its message alone, in the words of the
// option it names, without the source location that what() appends (a user
// mistyped a value; no line of dtw's code is at fault); anything else, a
// rank's error included, as what().
inline std::string usage_text(const std::exception& e) {
  const auto* error = dynamic_cast<const InvalidArgument*>(&e);
  if (error == nullptr || error->rank() >= 0) return e.what();
  std::string text = error->message();
  for (const std::string& note : error->notes()) text += "\n  while: " + note;
  return text;
}

// Rank counts dtw accepts on the command line.
inline constexpr int kMaxRanks = 4096;

inline constexpr const char* kExitCodesHelp =
    "Exit status:\n"
    "  0  success: everything ran and every check passed\n"
    "  1  a check failed: a test, a demo's result, a comparison with the reference\n"
    "  2  bad usage: an unknown option, a value out of range, an output that cannot be written\n"
    "  3  a run failed: an error or deadlock in a run, a write that failed, a child process that\n"
    "     crashed or was killed, mpirun's own failure (also the MPI watchdog's status when it\n"
    "     aborts a hung job)\n"
    "The benchmark programs (dtw bench NAME) end with the same statuses.";

}  // namespace dtw::cli
