// The names of chapter 01's algorithms: one table per collective that has a
// choice of algorithms, indexed by the enum's value, and what reads them.
//
// A table entry is the name dispatch.cpp announces to the fingerprint check
// before any message moves: the collective and the algorithm,
// "allreduce:ring". The algorithm is part of it because ranks that pick
// different algorithms for the same collective would exchange messages that
// never match -- a hang -- where a mismatch of names is a clear error that
// says who called what. The part after the colon is the name a learner types
// and reads ("ring" in `dtw bench collectives --algo ring` and in its
// tables): name_of returns it and parse_allreduce_algo reads it back.
//
// One table serves both, so a new algorithm is named once (its enum value in
// collectives.h, its entry here, its file and list entry in CMake), and the
// table's length is how check_algo (algorithms.h) knows which values exist.
#include <array>
#include <string>

#include "algorithms.h"
#include "collectives.h"

namespace dtw::ch01 {
namespace {

constexpr std::array<const char*, 5> kAllreduceCalls{"allreduce:naive", "allreduce:binomial",
                                                     "allreduce:ring", "allreduce:rabenseifner",
                                                     "allreduce:direct"};
constexpr std::array<const char*, 3> kBroadcastCalls{"broadcast:linear", "broadcast:binomial",
                                                     "broadcast:scatter-allgather"};
constexpr std::array<const char*, 2> kReduceCalls{"reduce:linear", "reduce:binomial"};
constexpr std::array<const char*, 2> kAllgatherCalls{"allgather:ring",
                                                     "allgather:recursive-doubling"};
constexpr std::array<const char*, 2> kReduceScatterCalls{"reduce_scatter:ring",
                                                         "reduce_scatter:recursive-halving"};

// "allreduce:ring" -> "ring" ("?", a value out of range, stays "?").
std::string_view after_colon(std::string_view call) {
  return call.substr(call.find(':') + 1);
}

}  // namespace

namespace detail {

std::span<const char* const> call_names(AllreduceAlgo /*algo*/) {
  return kAllreduceCalls;
}
std::span<const char* const> call_names(BroadcastAlgo /*algo*/) {
  return kBroadcastCalls;
}
std::span<const char* const> call_names(ReduceAlgo /*algo*/) {
  return kReduceCalls;
}
std::span<const char* const> call_names(AllgatherAlgo /*algo*/) {
  return kAllgatherCalls;
}
std::span<const char* const> call_names(ReduceScatterAlgo /*algo*/) {
  return kReduceScatterCalls;
}

}  // namespace detail

std::string_view name_of(AllreduceAlgo a) {
  return after_colon(detail::call_name(a));
}
std::string_view name_of(BroadcastAlgo a) {
  return after_colon(detail::call_name(a));
}
std::string_view name_of(ReduceAlgo a) {
  return after_colon(detail::call_name(a));
}
std::string_view name_of(AllgatherAlgo a) {
  return after_colon(detail::call_name(a));
}
std::string_view name_of(ReduceScatterAlgo a) {
  return after_colon(detail::call_name(a));
}

// Reads a name back, and lists every valid one when it is none of them (the
// command line passes what the user typed straight here).
AllreduceAlgo parse_allreduce_algo(std::string_view name) {
  std::string valid;
  for (std::size_t i = 0; i < kAllreduceCalls.size(); ++i) {
    const auto algo = static_cast<AllreduceAlgo>(i);
    if (name_of(algo) == name) return algo;
    valid += (valid.empty() ? "" : ", ") + std::string(name_of(algo));
  }
  DTW_CHECK_ARG(false, "unknown allreduce algorithm '" << name << "' (valid: " << valid << ")");
  return AllreduceAlgo::kRing;  // not reached
}

}  // namespace dtw::ch01
