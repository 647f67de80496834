#pragma once
// Shares the pieces of a launch report between processes: each process packs
// the rows, trace events and errors it knows, and every process merges all of
// them, so every process ends with the same Report.
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/launch.h"

namespace dtw::mpi {

/// What one process knows after a launch.
struct PartialReport {
  std::vector<int> ranks;   ///< world ranks whose sent links follow
  std::vector<Link> links;  ///< the links the ranks in `ranks` sent on
  std::vector<TraceEvent> trace;
  std::vector<MemorySnapshot> memory;  ///< the ledgers of the ranks in `ranks`
  std::vector<RankError> errors;
  std::vector<std::string> bare_messages;  ///< Error::message() of each error

  /// Adds world rank `rank` and the links it sent on, from its counters.
  void add_rank(int rank, const Traffic& traffic) {
    ranks.push_back(rank);
    for (const PeerTraffic& e : traffic.peers())
      if (e.messages_sent > 0) links.push_back({rank, e.peer, e.bytes_sent, e.messages_sent});
  }
};


/// Rethrows `error` as the dtw exception type its kind names.
[[noreturn]] void throw_remote(const RankError& error, const std::string& bare_message);

class Job;

/// Collective over every process of the job, those that sat the launch out
/// too: merges every process's `part` into one Report, the same everywhere.
/// `job` (this process's communicators, or null) is kept alive past its
/// release if the launch failed, since freeing it could let a late message
/// land in a later launch. With `first_error`, picks the failure launch()
/// rethrows: the first that is not a consequence of another, as this
/// process's own exception when it is its own, else rebuilt from the message.
Report merge_parts(const char* backend, int world, int my_rank, Tracer::Clock::time_point start,
                   const PartialReport& part, std::shared_ptr<Job> job,
                   std::exception_ptr own_error, std::exception_ptr* first_error);

}  // namespace dtw::mpi
