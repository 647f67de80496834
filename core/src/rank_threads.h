#pragma once
// What every backend that runs its ranks as threads of one process shares:
// per-rank counters and tracers, turning a rank's exception into a RankError,
// and assembling the Report once the threads have joined.
#include <exception>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/launch.h"

namespace dtw::detail {

// The failures of one launch, in the order they happened.
class RankFailures {
 public:
  void add(int rank, const Error& e, std::exception_ptr ptr) {
    std::lock_guard lock(mu_);
    errors_.push_back({rank, e.kind(), e.what()});
    const bool aborted = dynamic_cast<const AbortedError*>(&e) != nullptr;
    if (aborted && !first_abort_) first_abort_ = ptr;
    if (!aborted && !first_) first_ = ptr;
  }
  // The first failure that is not a consequence of another (an AbortedError
  // only if every failure is one).
  std::exception_ptr first() const { return first_ ? first_ : first_abort_; }
  std::vector<RankError> take_errors() { return std::move(errors_); }
  // What a rank's std::bad_alloc is reported with: the world and the launch's
  // estimate of it (world_fit.h), set before any rank starts.
  void set_memory_note(std::string note) { memory_note_ = std::move(note); }
  const std::string& memory_note() const { return memory_note_; }

 private:
  std::mutex mu_;
  std::vector<RankError> errors_;
  std::exception_ptr first_, first_abort_;
  std::string memory_note_;
};

// Runs `body`, recording what it throws (with `rank` set) in `failures`.
// Returns the exception, or nullptr when `body` returned normally.
template <class F>
std::exception_ptr run_recording(int rank, RankFailures& failures, F&& body) {
  try {
    body();
    return nullptr;
  } catch (Error& e) {
    e.set_rank(rank);
    failures.add(rank, e, std::current_exception());
    return std::current_exception();
  } catch (const std::bad_alloc& e) {
    // Out of memory is the launch's business, not a bug of the rank: say which
    // world ran out and what the launch thought it needed.
    const std::string& note = failures.memory_note();
    OutOfMemory wrapped(std::string("out of memory (") + e.what() + ")" +
                        (note.empty() ? "" : " in " + note) +
                        ": use fewer ranks or less data a rank");
    wrapped.set_rank(rank);
    auto ptr = std::make_exception_ptr(wrapped);
    failures.add(rank, wrapped, ptr);
    return ptr;
  } catch (const std::exception& e) {
    Error wrapped(std::string("uncaught std::exception: ") + e.what());
    wrapped.set_rank(rank);
    auto ptr = std::make_exception_ptr(wrapped);
    failures.add(rank, wrapped, ptr);
    return ptr;
  } catch (...) {
    Error wrapped("uncaught exception of unknown type");
    wrapped.set_rank(rank);
    auto ptr = std::make_exception_ptr(wrapped);
    failures.add(rank, wrapped, ptr);
    return ptr;
  }
}

// Each rank's traffic counters and tracer, made before the threads start.
struct RankRecorders {
  RankRecorders(int world_size, bool trace, std::int64_t memory_cap) : epoch(Tracer::Clock::now()) {
    for (int r = 0; r < world_size; ++r) {
      members.push_back(r);
      traffic.push_back(std::make_shared<Traffic>(world_size));
      tracers.push_back(std::make_shared<Tracer>(r, trace, epoch));
      ledgers.push_back(std::make_shared<MemoryLedger>(r, memory_cap));
      places.emplace_back("host");
    }
  }
  // The report of a finished launch; `first_error`, when given, receives the
  // failure launch() should rethrow.
  Report report(const char* backend, RankFailures& failures,
                std::exception_ptr* first_error) const {
    Report out;
    out.world_size = static_cast<int>(members.size());
    out.backend = backend;
    out.seconds = std::chrono::duration<double>(Tracer::Clock::now() - epoch).count();
    out.traffic = TrafficMatrix(out.world_size);
    for (std::size_t r = 0; r < members.size(); ++r) {
      out.traffic.add_sent(static_cast<int>(r), *traffic[r]);
      const auto& events = tracers[r]->events();
      out.trace.insert(out.trace.end(), events.begin(), events.end());
      out.memory.push_back(ledgers[r]->snapshot());
    }
    out.places = places;
    out.errors = failures.take_errors();
    if (first_error) *first_error = failures.first();
    return out;
  }

  Tracer::Clock::time_point epoch;
  std::vector<int> members;
  std::vector<std::shared_ptr<Traffic>> traffic;
  std::vector<std::shared_ptr<Tracer>> tracers;
  std::vector<std::shared_ptr<MemoryLedger>> ledgers;
  // Where each rank runs (Report::places), set before the ranks start.
  std::vector<std::string> places;
};

}  // namespace dtw::detail
