#pragma once
// Reads one GoogleTest failure text back into its parts, so that `dtw check`
// can show a failure in a few lines: what went wrong, where the check is, and
// the context the test set (DTW_TRACE: GoogleTest's trace, or the "while:"
// notes of an error that escaped).
#include <string>
#include <vector>

namespace dtw::cli {

struct FailureReport {
  std::vector<std::string> message;  // what went wrong, without GoogleTest's boilerplate
  std::string location;              // "tests/01-x/sweep.h:163", "" for an escaped exception
  std::vector<std::string> context;  // innermost first, duplicates removed
  bool exception = false;            // an exception escaped the test
};

/// Splits `failure`; paths under `root` are shown relative to it.
FailureReport parse_failure(const std::string& failure, const std::string& root);

}  // namespace dtw::cli
