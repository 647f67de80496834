#pragma once
// The algorithms behind chapter 01's contract, one per file. dispatch.cpp has
// already checked the arguments when one of these runs, so they only move and
// combine data. Each works in place on spans, for float, double, int32_t and
// int64_t (every file instantiates its template for those four).
//
// Layout conventions shared by every algorithm:
// - Chunked data follows dtw::Chunks(n, p): chunk i belongs to rank i.
// - Reductions never see ReduceOp::kAvg: dispatch reduces with kSum and
//   divides once at the end.
// - Every algorithm gets the communicator to talk on and the `tag` of its
//   operation, and uses that tag for all its messages. dispatch.cpp passes
//   comm.collective_channel() -- the same ranks in a context of their own, so
//   no message of the caller's point-to-point can ever match a collective's --
//   and comm.next_collective_tag(), a per-communicator operation counter: two
//   collectives in flight on one communicator never take each other's
//   messages. Within one operation, messages between two ranks match in the
//   order they were sent (FIFO per source and tag), which keeps the phases of
//   an algorithm apart.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/comm.h"
#include "dtw/errors.h"
#include "collectives.h"

namespace dtw::ch01::detail {

// A receive whose count differs from what this rank expects means the ranks
// disagree on the collective's count: say so instead of computing garbage.
inline void expect_count(const Comm& comm, const char* what, int src, std::int64_t got,
                         std::int64_t expected) {
  DTW_CHECK_ARG(got == expected, "rank " << comm.rank() << ": " << what << ": received " << got
                                         << " elements from rank " << src << ", expected "
                                         << expected << " (do all ranks pass the same count?)");
}

// True when the two spans share memory (std::less orders any two pointers).
template <class T>
bool overlap(std::span<const T> a, std::span<T> b) {
  const std::less<const T*> before;
  return !a.empty() && !b.empty() && before(a.data(), b.data() + b.size()) &&
         before(b.data(), a.data() + a.size());
}

// Recursive halving and doubling need a power-of-two number of ranks; the
// chapter text ("Non-powers of two") shows how any p is folded down to one.
// Pof2Core describes that fold for one rank: q, the largest power of two <= p;
// extra = p - q; the first 2·extra ranks form the pairs (0,1), (2,3), ...,
// whose even rank joins the core and whose odd rank sits out; every rank from
// 2·extra on is a core rank without a partner. Core ranks are numbered 0..q-1
// in the order of their real ranks. Written in step 01.4
// (allgather_recursive_doubling.cpp) and used again in 01.5 and 01.9.
struct Pof2Core {
  Pof2Core(int p, int rank);
  // The real rank of core rank `c` (0 <= c < q).
  int real(int c) const;

  int q = 1;           // core size, a power of two
  int extra = 0;       // p - q: number of pairs
  int core_rank = -1;  // this rank's index in the core, -1 when it sits out
  int partner = -1;    // the other rank of this rank's pair, -1 when unpaired
};

// Where each core rank's data starts in a vector of n elements laid out as
// Chunks(n, p) over the real ranks: core rank c stands for the chunks of the
// real ranks of its pair (or its own), which are contiguous. Returns q + 1
// offsets: bounds[c] is where core rank c's part starts, bounds[q] = n.
// Written in step 01.4 (allgather_recursive_doubling.cpp).
std::vector<std::int64_t> core_bounds_by_rank(const Pof2Core& core, const Chunks& chunks);

// ---- the algorithms' names (algo_names.cpp) ----------------------------------
// The names dispatch.cpp announces to the fingerprint check, one table per
// collective indexed by the enum's value: "allreduce:ring", ... (name_of, in
// collectives.h, is the part after the colon).
std::span<const char* const> call_names(AllreduceAlgo algo);
std::span<const char* const> call_names(BroadcastAlgo algo);
std::span<const char* const> call_names(ReduceAlgo algo);
std::span<const char* const> call_names(AllgatherAlgo algo);
std::span<const char* const> call_names(ReduceScatterAlgo algo);

// An enum value cast from an out-of-range integer would index past the names
// or fall through every case of a switch: refuse it before any message moves.
// `count`: how many values the enum has (call_names(algo).size()).
template <class Algo>
void check_algo(const Comm& comm, const char* what, Algo algo, std::size_t count) {
  const int value = static_cast<int>(algo);
  DTW_CHECK_ARG(value >= 0 && static_cast<std::size_t>(value) < count,
                "rank " << comm.rank() << ": " << what << ": unknown algorithm " << value
                        << " (valid: 0.." << count - 1 << ")");
}

// A ReduceOp cast from an out-of-range integer would reach the reduction
// kernel, or on one rank (where nothing is reduced) pass unnoticed: refuse it
// on entry, blocking and non-blocking collectives alike.
inline void check_op(const Comm& comm, const char* what, ReduceOp op) {
  DTW_CHECK_ARG(is_valid(op), "rank " << comm.rank() << ": " << what << ": unknown ReduceOp "
                                      << static_cast<int>(op)
                                      << " (valid: sum, prod, min, max, avg = 0..4)");
}

// `algo`'s name in call_names, or "?" for a value check_algo would refuse.
template <class Algo>
const char* call_name(Algo algo) {
  const std::span<const char* const> calls = call_names(algo);
  const auto i = static_cast<std::size_t>(algo);
  return i < calls.size() ? calls[i] : "?";
}

// ---- broadcast ---------------------------------------------------------------
template <class T>
void broadcast_linear(Comm& comm, std::span<T> data, int root, int tag);
template <class T>
void broadcast_binomial(Comm& comm, std::span<T> data, int root, int tag);
template <class T>
void broadcast_scatter_allgather(Comm& comm, std::span<T> data, int root, int tag);

// ---- reduce (result at root; other ranks' data is scratch afterwards) --------
template <class T>
void reduce_linear(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag);
template <class T>
void reduce_binomial(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag);

// ---- gather / scatter (blocks of in.size() resp. out.size() elements) --------
template <class T>
void gather_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag);
template <class T>
void scatter_linear(Comm& comm, std::span<const T> in, std::span<T> out, int root, int tag);

// ---- allgather, in place: rank r's chunk is already in `data` ----------------
// `shift`: rank r starts with chunk r - shift (broadcast's scatter puts chunk
// "r - root" on rank r); 0 for a plain allgather.
template <class T>
void allgather_ring(Comm& comm, std::span<T> data, const Chunks& chunks, int tag,
                    int shift = 0);
template <class T>
void allgather_recursive_doubling(Comm& comm, std::span<T> data, const Chunks& chunks, int tag);
// The power-of-two core of recursive doubling: core rank c starts with
// data[bounds[c], bounds[c+1]) and ends with data[bounds[0], bounds[q]).
template <class T>
void allgather_doubling_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                             std::span<const std::int64_t> bounds, int tag);

// ---- reduce-scatter, in place: afterwards chunk r of `data` is reduced -------
template <class T>
void reduce_scatter_ring(Comm& comm, std::span<T> data, const Chunks& chunks, ReduceOp op, int tag);
template <class T>
void reduce_scatter_recursive_halving(Comm& comm, std::span<T> data, const Chunks& chunks,
                                      ReduceOp op, int tag);
// The power-of-two core of recursive halving: afterwards core rank c holds the
// reduction of data[bounds[c], bounds[c+1]).
template <class T>
void reduce_scatter_halving_core(Comm& comm, std::span<T> data, const Pof2Core& core,
                                 std::span<const std::int64_t> bounds, ReduceOp op, int tag);

// ---- allreduce (in place) ---------------------------------------------------
template <class T>
void allreduce_naive(Comm& comm, std::span<T> data, ReduceOp op, int tag);
template <class T>
void allreduce_binomial(Comm& comm, std::span<T> data, ReduceOp op, int tag);
template <class T>
void allreduce_ring(Comm& comm, std::span<T> data, ReduceOp op, int tag);
template <class T>
void allreduce_rabenseifner(Comm& comm, std::span<T> data, ReduceOp op, int tag);
template <class T>
void allreduce_direct(Comm& comm, std::span<T> data, ReduceOp op, int tag);

// ---- all-to-all and barrier ---------------------------------------------------
template <class T>
void alltoall_pairwise(Comm& comm, std::span<const T> in, std::span<T> out, int tag);
void barrier_dissemination(Comm& comm, int tag);

}  // namespace dtw::ch01::detail

// Every algorithm file ends with DTW_CH01_INSTANTIATE(its instantiation macro).
#define DTW_CH01_FOR_EACH_TYPE(X) X(float) X(double) X(std::int32_t) X(std::int64_t)
