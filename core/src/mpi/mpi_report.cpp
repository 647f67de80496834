#include "mpi/mpi_report.h"

#include <cstring>
#include <numeric>

#include "dtw/results.h"

#include "dtw/errors.h"
#include "dtw/mpi.h"
#include "mpi/mpi_job.h"

// How a PartialReport travels (dtw/results.h): field by field, each a
// result type allgather_results already knows.
namespace dtw::detail {
template <>
struct ResultCodec<TraceEvent> {
  static void put(ResultWriter& w, const TraceEvent& e) {
    ResultCodec<std::string>::put(w, e.name);
    ResultCodec<std::string>::put(w, e.category);
    for (const std::int64_t x : {std::int64_t{e.rank}, std::int64_t{e.peer}, e.bytes, std::int64_t{e.tag}})
      ResultCodec<std::int64_t>::put(w, x);
    ResultCodec<double>::put(w, e.start_us);
    ResultCodec<double>::put(w, e.end_us);
    for (std::int64_t x : {std::int64_t{e.is_send}, std::int64_t{e.stage}, std::int64_t{e.micro_batch}})
      ResultCodec<std::int64_t>::put(w, x);
    ResultCodec<double>::put(w, e.flops);
  }
  static TraceEvent get(ResultReader& r) {
    TraceEvent e;
    e.name = ResultCodec<std::string>::get(r);
    e.category = ResultCodec<std::string>::get(r);
    e.rank = static_cast<int>(ResultCodec<std::int64_t>::get(r));
    e.peer = static_cast<int>(ResultCodec<std::int64_t>::get(r));
    e.bytes = ResultCodec<std::int64_t>::get(r);
    e.tag = static_cast<int>(ResultCodec<std::int64_t>::get(r));
    e.start_us = ResultCodec<double>::get(r);
    e.end_us = ResultCodec<double>::get(r);
    e.is_send = ResultCodec<std::int64_t>::get(r) != 0;
    e.stage = static_cast<int>(ResultCodec<std::int64_t>::get(r));
    e.micro_batch = static_cast<int>(ResultCodec<std::int64_t>::get(r));
    e.flops = ResultCodec<double>::get(r);
    return e;
  }
};

template <>
struct ResultCodec<RankError> {
  static void put(ResultWriter& w, const RankError& e) {
    ResultCodec<int>::put(w, e.rank);
    ResultCodec<std::string>::put(w, e.kind);
    ResultCodec<std::string>::put(w, e.message);
  }
  static RankError get(ResultReader& r) {
    RankError e;
    e.rank = ResultCodec<int>::get(r);
    e.kind = ResultCodec<std::string>::get(r);
    e.message = ResultCodec<std::string>::get(r);
    return e;
  }
};

template <>
struct ResultCodec<mpi::PartialReport> {
  static void put(ResultWriter& w, const mpi::PartialReport& p) {
    ResultCodec<std::vector<int>>::put(w, p.ranks);
    ResultCodec<std::vector<Link>>::put(w, p.links);
    ResultCodec<std::vector<TraceEvent>>::put(w, p.trace);
    ResultCodec<std::vector<MemorySnapshot>>::put(w, p.memory);
    ResultCodec<std::vector<RankError>>::put(w, p.errors);
    ResultCodec<std::vector<std::string>>::put(w, p.bare_messages);
  }
  static mpi::PartialReport get(ResultReader& r) {
    mpi::PartialReport p;
    p.ranks = ResultCodec<std::vector<int>>::get(r);
    p.links = ResultCodec<std::vector<Link>>::get(r);
    p.trace = ResultCodec<std::vector<TraceEvent>>::get(r);
    p.memory = ResultCodec<std::vector<MemorySnapshot>>::get(r);
    p.errors = ResultCodec<std::vector<RankError>>::get(r);
    p.bare_messages = ResultCodec<std::vector<std::string>>::get(r);
    return p;
  }
};
}  // namespace dtw::detail

namespace dtw::mpi {
namespace {

// Every process's part, on every process, those that sat the launch out included.
std::vector<PartialReport> share_with_every_process(const PartialReport& part) {
  const std::unique_ptr<Comm> all = process_comm();
  all->set_verify_collectives(false);
  return allgather_results(*all, part);
}

template <class E>
[[noreturn]] void throw_as(const RankError& error, const std::string& bare) {
  // what() ends in " [path:line]" when the raiser recorded where it was.
  std::string file;
  int line = 0;
  const std::string& what = error.message;
  const auto open = what.rfind(" [");
  if (!what.empty() && what.back() == ']' && open != std::string::npos) {
    const std::string where = what.substr(open + 2, what.size() - open - 3);
    const auto colon = where.rfind(':');
    if (colon != std::string::npos) {
      file = where.substr(0, colon);
      line = std::atoi(where.c_str() + colon + 1);
    }
  }
  E e(bare, file.c_str(), line);
  e.set_rank(error.rank);
  throw e;
}

}  // namespace

void throw_remote(const RankError& error, const std::string& bare) {
  const std::string& k = error.kind;
  if (k == "InvalidArgument") throw_as<InvalidArgument>(error, bare);
  if (k == "NotImplemented") throw_as<NotImplemented>(error, bare);
  if (k == "DeadlockError") throw_as<DeadlockError>(error, bare);
  if (k == "TimeoutError") throw_as<TimeoutError>(error, bare);
  if (k == "AbortedError") throw_as<AbortedError>(error, bare);
  if (k == "CollectiveMismatch") throw_as<CollectiveMismatch>(error, bare);
  if (k == "CudaError") throw_as<CudaError>(error, bare);
  if (k == "NcclError") throw_as<NcclError>(error, bare);
  if (k == "MpiError") throw_as<MpiError>(error, bare);
  if (k == "OutOfMemory") throw_as<OutOfMemory>(error, bare);
  throw_as<Error>(error, bare);
}

Report merge_parts(const char* backend, int world, int my_rank, Tracer::Clock::time_point start,
                   const PartialReport& part, std::shared_ptr<Job> job,
                   std::exception_ptr own_error, std::exception_ptr* first_error) {
  Report report;
  report.world_size = world;
  report.backend = backend;
  report.traffic = TrafficMatrix(world);
  report.memory.resize(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) report.memory[static_cast<std::size_t>(r)].rank = r;
  PartialReport merged;
  for (const PartialReport& from : share_with_every_process(part)) {
    for (const Link& l : from.links)
      if (l.src >= 0 && l.src < world && l.dst >= 0 && l.dst < world)
        report.traffic.add(l.src, l.dst, l.bytes, l.messages);
    for (const MemorySnapshot& m : from.memory)
      if (m.rank >= 0 && m.rank < world) report.memory[static_cast<std::size_t>(m.rank)] = m;
    merged.trace.insert(merged.trace.end(), from.trace.begin(), from.trace.end());
    merged.errors.insert(merged.errors.end(), from.errors.begin(), from.errors.end());
    merged.bare_messages.insert(merged.bare_messages.end(), from.bare_messages.begin(),
                                from.bare_messages.end());
  }
  report.seconds = std::chrono::duration<double>(Tracer::Clock::now() - start).count();
  report.trace = std::move(merged.trace);
  report.errors = merged.errors;
  if (job && !report.errors.empty()) job->keep_communicators();
  job.reset();
  if (!first_error || report.errors.empty()) return report;

  std::size_t first = 0;
  for (std::size_t i = 0; i < report.errors.size(); ++i) {
    if (report.errors[i].kind != "AbortedError") {
      first = i;
      break;
    }
  }
  if (report.errors[first].rank == my_rank && own_error) {
    *first_error = own_error;
  } else {
    try {
      throw_remote(report.errors[first], merged.bare_messages[first]);
    } catch (...) {
      *first_error = std::current_exception();
    }
  }
  return report;
}

}  // namespace dtw::mpi
