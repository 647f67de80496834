#include "mpi/mpi_report.h"

#include <cstring>

#include "dtw/errors.h"
#include "dtw/mpi.h"
#include "mpi/mpi_job.h"

namespace dtw::mpi {
namespace {

class Writer {
 public:
  template <class T>
  void put(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void put_string(const std::string& s) {
    put<std::int64_t>(static_cast<std::int64_t>(s.size()));
    out_ += s;
  }
  void put_vector(const std::vector<std::int64_t>& v) {
    put<std::int64_t>(static_cast<std::int64_t>(v.size()));
    for (std::int64_t x : v) put(x);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    DTW_CHECK(pos_ + sizeof(T) <= in_.size(), MpiError, "mpi launch: truncated report from a peer");
    T value;
    std::memcpy(&value, in_.data() + pos_, sizeof value);
    pos_ += sizeof value;
    return value;
  }
  std::string get_string() {
    const auto n = static_cast<std::size_t>(get<std::int64_t>());
    DTW_CHECK(pos_ + n <= in_.size(), MpiError, "mpi launch: truncated report from a peer");
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<std::int64_t> get_vector() {
    std::vector<std::int64_t> v(static_cast<std::size_t>(get<std::int64_t>()));
    for (auto& x : v) x = get<std::int64_t>();
    return v;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  std::size_t pos_ = 0;
};

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

std::string pack(const PartialReport& part) {
  Writer w;
  w.put<std::int64_t>(static_cast<std::int64_t>(part.ranks.size()));
  for (std::size_t i = 0; i < part.ranks.size(); ++i) {
    w.put<std::int32_t>(part.ranks[i]);
    w.put_vector(part.bytes[i]);
    w.put_vector(part.messages[i]);
  }
  w.put<std::int64_t>(static_cast<std::int64_t>(part.trace.size()));
  for (const TraceEvent& e : part.trace) {
    w.put_string(e.name);
    w.put_string(e.category);
    w.put<std::int32_t>(e.rank);
    w.put<std::int32_t>(e.peer);
    w.put<std::int64_t>(e.bytes);
    w.put<std::int32_t>(e.tag);
    w.put<double>(e.start_us);
    w.put<double>(e.end_us);
  }
  w.put<std::int64_t>(static_cast<std::int64_t>(part.errors.size()));
  for (std::size_t i = 0; i < part.errors.size(); ++i) {
    w.put<std::int32_t>(part.errors[i].rank);
    w.put_string(part.errors[i].kind);
    w.put_string(part.errors[i].message);
    w.put_string(part.bare_messages[i]);
  }
  return w.take();
}

void unpack_into(std::string_view blob, Report& report, PartialReport& merged) {
  if (blob.empty()) return;
  Reader r(blob);
  const auto rows = r.get<std::int64_t>();
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto rank = static_cast<std::size_t>(r.get<std::int32_t>());
    auto bytes = r.get_vector();
    auto messages = r.get_vector();
    if (rank < report.bytes.size()) {
      report.bytes[rank] = std::move(bytes);
      report.messages[rank] = std::move(messages);
    }
  }
  const auto events = r.get<std::int64_t>();
  for (std::int64_t i = 0; i < events; ++i) {
    TraceEvent e;
    e.name = r.get_string();
    e.category = r.get_string();
    e.rank = r.get<std::int32_t>();
    e.peer = r.get<std::int32_t>();
    e.bytes = r.get<std::int64_t>();
    e.tag = r.get<std::int32_t>();
    e.start_us = r.get<double>();
    e.end_us = r.get<double>();
    merged.trace.push_back(std::move(e));
  }
  const auto errors = r.get<std::int64_t>();
  for (std::int64_t i = 0; i < errors; ++i) {
    RankError e;
    e.rank = r.get<std::int32_t>();
    e.kind = r.get_string();
    e.message = r.get_string();
    merged.errors.push_back(std::move(e));
    merged.bare_messages.push_back(r.get_string());
  }
}

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
  throw_as<Error>(error, bare);
}

Report merge_parts(const char* backend, int world, int my_rank, Tracer::Clock::time_point start,
                   const PartialReport& part, std::shared_ptr<Job> job,
                   std::exception_ptr own_error, std::exception_ptr* first_error) {
  Report report;
  report.world_size = world;
  report.backend = backend;
  report.bytes.assign(static_cast<std::size_t>(world),
                      std::vector<std::int64_t>(static_cast<std::size_t>(world)));
  report.messages = report.bytes;
  PartialReport merged;
  for (const std::string& blob : allgather_strings(pack(part))) unpack_into(blob, report, merged);
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
