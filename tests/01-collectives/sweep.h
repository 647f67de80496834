#pragma once
// The sweep every chapter 01 test runs: world sizes, counts, roots, element
// types and ops, the inputs each rank contributes, and the tolerance a float
// result is held to. Expected values always come from the backend's reference
// collectives (dtw/reference.h), which tests/core/reference_test.cpp checks
// against a plain sequential computation.
//
// One launch per world size runs the whole inner sweep (types x ops x counts
// x roots) so that thread start-up is paid eight times, not thousands.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives.h"
#include "dtw/reference.h"
#include "dtw_test.h"

namespace dtw::ch01::sweep {

/// World sizes: 1, powers of two, odd and non-powers of two, and 16 (oversubscribed).
inline const std::vector<int> kWorlds = {1, 2, 3, 4, 5, 7, 8, 16};
inline const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                           ReduceOp::kMax, ReduceOp::kAvg};
/// A prime, so it divides by no world size: every chunking is uneven.
inline constexpr std::int64_t kLargeCount = 1'000'003;

/// Calls f.template operator()<T>() for each element type the contract covers.
template <class F>
void for_each_type(F&& f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<std::int32_t>();
  f.template operator()<std::int64_t>();
}

// The 1 000 003-element count runs only for float and int64 sums on worlds of
// at most 8 ranks: every algorithm's large-message path (and the uneven
// chunking of a prime count) is covered there, and running it for every
// type x op x world would cost minutes on a two-core machine.
template <class T>
bool runs_large(int p, ReduceOp op) {
  return (std::is_same_v<T, float> || std::is_same_v<T, std::int64_t>)&&op == ReduceOp::kSum &&
         p <= 8;
}

/// Counts for world size p: empty; one element (most ranks' chunks empty);
/// p-1 (one chunk empty); 3p+1 (not divisible by p); and, when `large`, 1 000 003.
inline std::vector<std::int64_t> counts_for(int p, bool large) {
  std::vector<std::int64_t> counts = {0, 1, p - 1, 3 * p + 1};
  if (large) counts.push_back(kLargeCount);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

/// Per-rank block sizes for collectives whose result is p blocks (gather,
/// scatter, allgather, alltoall): the same small counts, and for the large
/// case a block of 1 000 003 / p elements so that the whole result, not each
/// block, is about a million elements.
inline std::vector<std::int64_t> block_counts_for(int p, bool large) {
  std::vector<std::int64_t> counts = counts_for(p, false);
  if (large) counts.push_back(kLargeCount / p);
  return counts;
}

/// Roots: the first, the middle and the last rank.
inline std::vector<int> roots_for(int p) {
  std::vector<int> roots = {0, p / 2, p - 1};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

/// Rank `rank`'s input: `count` values that differ across ranks and indices.
/// Integers stay small (|x| <= 20; prod factors in {-1, 1, 2}, at most one 2
/// in three) so no reduction over 16 ranks overflows int32. Floats are not
/// integer-valued, so different summation orders really round differently
/// and the tolerance below is exercised: sums see |x| <= 1, products see
/// factors in [0.625, 1.375].
template <class T>
std::vector<T> make_input(int rank, std::int64_t count, ReduceOp op, int salt = 0) {
  std::vector<T> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t h = (rank + 1) * 7919 + i * 104729 + salt * 31;
    T x;
    if (op == ReduceOp::kProd) {
      if constexpr (std::is_integral_v<T>) {
        x = static_cast<T>(h % 3 == 0 ? 2 : (h % 7 == 0 ? -1 : 1));
      } else {
        x = static_cast<T>(1.0 + static_cast<double>(h % 7 - 3) / 8.0);
      }
    } else if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(h % 41 - 20);
    } else {
      x = static_cast<T>(static_cast<double>(h % 2001 - 1000) / 1000.0);
    }
    v[static_cast<std::size_t>(i)] = x;
  }
  return v;
}

/// How far an algorithm's float result may be from the reference's.
///
/// Both compute each element from the same p inputs, in different orders.
/// Any order of summing p terms has error at most (p-1)·u·Σ|x_i| (u = eps/2,
/// to first order; Higham, Accuracy and Stability, §4.2), so the two results
/// differ by at most 2(p-1)·u·Σ|x_i| = (p-1)·eps·Σ|x_i| <= (p-1)·eps·p·max|x|.
/// Sums here use |x| <= 1, and the comparison is relative to max(1, |expected|),
/// so (p-1)·p·eps bounds it. A product of p factors carries a relative error of
/// at most (p-1)·u per side, so (p-1)·eps relative suffices, which the same
/// bound covers. avg adds one division (one more rounding, eps). min and max
/// pick one of the inputs: exact. Integers: exact.
template <class T>
double tolerance(int p, ReduceOp op) {
  if constexpr (std::is_integral_v<T>) {
    return 0;
  } else {
    if (op == ReduceOp::kMin || op == ReduceOp::kMax || p == 1) return 0;
    const double eps = std::numeric_limits<T>::epsilon();
    return (p - 1) * p * eps + eps;
  }
}

/// "allreduce ring, p 5, count 16, float32, sum" for DTW_TRACE.
template <class T>
std::string describe(const char* what, int p, std::int64_t count, int op = -1, int root = -1) {
  std::ostringstream out;
  out << what << ", p " << p << ", count " << count << ", " << name_of(data_type_of<T>());
  if (op >= 0) out << ", " << name_of(static_cast<ReduceOp>(op));
  if (root >= 0) out << ", root " << root;
  return out.str();
}

/// One rank's comparisons during a sweep. A broken algorithm fails every
/// configuration after the first, so only a rank's first mismatch is reported;
/// the rank keeps taking part in the collectives either way, so the other
/// ranks are never left waiting, and no extra messages are needed to agree on
/// stopping.
class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}

  /// Compares one result; reports it (with `context` as the trace, unless
  /// the innermost DTW_TRACE says it already) unless an earlier comparison on
  /// this rank already failed.
  template <class T>
  bool same(const std::vector<T>& expected, const std::vector<T>& got, double tol,
            const std::string& context) {
    if (failed_) return false;
    const std::string mismatch = dtw::testing::compare(rank_, expected, got, tol);
    if (mismatch.empty()) return true;
    failed_ = true;
    const auto& live = dtw::testing::detail::live_context();
    std::optional<dtw::testing::ScopedContext> trace;
    if (live.empty() || live.back().text != context) trace.emplace(__FILE__, __LINE__, context);
    ADD_FAILURE() << mismatch << " (later mismatches on this rank are not reported)";
    return false;
  }

 private:
  int rank_;
  bool failed_ = false;
};

/// False for a world the MPI twin (tests/mpi) would not run on MPI: one
/// larger than the job (DTW_MPI_TWIN_PROCESSES, set by its main) runs on
/// threads inside every process -- what the threads program tests already,
/// and, np copies at once, most of the twin's time on a two-core machine.
inline bool runs_here(int p) {
  static const int processes = [] {
    const char* n = std::getenv("DTW_MPI_TWIN_PROCESSES");
    return n != nullptr ? std::atoi(n) : 0;
  }();
  return processes == 0 || p <= processes;
}

/// Runs `body(comm)` on every world size with a bounded launch generous
/// enough for the large counts on a loaded two-core machine (under the MPI
/// twin, on the worlds that run on MPI: runs_here).
template <class F>
void on_every_world(F&& body, const std::vector<int>& worlds = kWorlds) {
  for (int p : worlds) {
    if (!runs_here(p)) continue;
    DTW_TRACE("world size " << p);
    dtw::testing::launch_bounded(p, body, std::chrono::seconds(60));
  }
}

/// One collective call with the count each rank passes, for the bad-input checks.
using CountedCall = std::function<void(Comm&, std::int64_t count)>;

/// With the fingerprint check off nothing announces the counts, so the
/// messages themselves must give a disagreement away: the last rank passing
/// one element more or fewer than the others must end in InvalidArgument on
/// some rank, never in a hang, a deadlock or a wrong answer. Each algorithm's
/// suite runs this for its own calls.
inline void expect_count_mismatch_fails(const std::string& name, const CountedCall& call) {
  for (int p : {2, 3, 5}) {
    for (int extra : {-1, 1}) {
      DTW_TRACE(name << ", p " << p << ", the last rank passes count 4p" << (extra > 0 ? "+1" : "-1")
                     << ", the fingerprint check off");
      LaunchOptions options;
      options.timeout = std::chrono::seconds(10);
      const Report report = dtw::testing::launch_collecting_bounded(p, options, [&](Comm& comm) {
        comm.set_verify_collectives(false);
        call(comm, 4 * p + (comm.rank() == p - 1 ? extra : 0));
      });
      bool invalid_argument = false;
      std::string kinds;
      for (const RankError& e : report.errors) {
        invalid_argument = invalid_argument || e.kind == "InvalidArgument";
        kinds += " " + e.kind + ": " + e.message + "\n";
      }
      EXPECT_TRUE(invalid_argument) << "no rank raised InvalidArgument; what the ranks raised:\n"
                                    << (kinds.empty() ? " (nothing: the call returned)\n" : kinds);
    }
  }
}

/// Rank 1 of 3 (the root where there is one) passes a buffer of the wrong
/// size: with the fingerprint check on or off, the call must end in an
/// InvalidArgument naming rank 1.
inline void expect_wrong_size_names_rank(const std::string& name,
                                         const std::function<void(Comm&)>& call) {
  for (bool check : {false, true}) {
    DTW_TRACE(name << ", p 3, rank 1's buffer has the wrong size, the fingerprint check "
                   << (check ? "on" : "off"));
    try {
      dtw::testing::launch_bounded(3, [&](Comm& comm) {
        comm.set_verify_collectives(check);
        call(comm);
      });
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(e.message().find("rank 1"), std::string::npos) << e.what();
    }
  }
}

}  // namespace dtw::ch01::sweep
