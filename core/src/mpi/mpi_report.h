#pragma once
// Shares the pieces of a launch report between processes: each process packs
// the rows, trace events and errors it knows, and every process merges all of
// them, so every process ends with the same Report.
#include <string>
#include <string_view>
#include <vector>

#include "dtw/launch.h"

namespace dtw::mpi {

/// What one process knows after a launch.
struct PartialReport {
  std::vector<int> ranks;  ///< world ranks whose traffic rows follow
  std::vector<std::vector<std::int64_t>> bytes, messages;
  std::vector<TraceEvent> trace;
  std::vector<RankError> errors;
  std::vector<std::string> bare_messages;  ///< Error::message() of each error
};

std::string pack(const PartialReport& part);
/// Merges one packed PartialReport into `report` (rows) and `part` (the rest).
void unpack_into(std::string_view blob, Report& report, PartialReport& merged);

/// Rethrows `error` as the dtw exception type its kind names.
[[noreturn]] void throw_remote(const RankError& error, const std::string& bare_message);

}  // namespace dtw::mpi
