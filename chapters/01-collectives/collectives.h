#pragma once
/// @file
/// Chapter 01 contract: collectives built from point-to-point messages.
///
/// Every function is *collective*: all ranks of `comm` call it with the same
/// count, type, op, root and algorithm. Reductions work in place on `data`
/// (the out-of-place forms copy `in` to `out` first). `ReduceOp::kAvg` is a
/// sum followed by a division by `comm.size()` (integer division for integer
/// types). Chunked results follow `dtw::Chunks(count, comm.size())`: the
/// first count % p ranks hold one element more.
///
/// Bad input (a root out of range, buffers of the wrong size, counts that
/// differ between ranks) raises dtw::InvalidArgument naming the rank and the
/// values; with the fingerprint check on (`Comm::verify_collective`) ranks
/// that disagree raise dtw::CollectiveMismatch instead of hanging.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/comm.h"
#include "dtw/types.h"

namespace dtw::ch01 {

/// Broadcast algorithms.
enum class BroadcastAlgo {
  kLinear,            ///< root sends to every rank: (p-1)(α + nβ)
  kBinomial,          ///< binomial tree: ⌈lg p⌉(α + nβ)
  kScatterAllgather,  ///< scatter n/p chunks, then ring allgather: (lg p + p-1)α + 2n(p-1)/p·β
};
/// Reduce algorithms (result at root).
enum class ReduceAlgo {
  kLinear,    ///< root receives and reduces from every rank in turn
  kBinomial,  ///< binomial tree towards root: ⌈lg p⌉(α + nβ + nγ)
};
/// Allgather algorithms.
enum class AllgatherAlgo {
  kRing,               ///< p-1 steps of one block to the right
  kRecursiveDoubling,  ///< lg p steps, doubling the exchanged block (any p: see the chapter)
};
/// Reduce-scatter algorithms.
enum class ReduceScatterAlgo {
  kRing,               ///< p-1 steps of one chunk around the ring
  kRecursiveHalving,   ///< lg p steps, halving the exchanged half (any p: see the chapter)
};
/// Allreduce algorithms.
enum class AllreduceAlgo {
  kNaive,         ///< reduce to rank 0, then broadcast: the parameter-server pattern
  kBinomial,      ///< binomial-tree reduce, then binomial-tree broadcast
  kRing,          ///< ring reduce-scatter + ring allgather: bandwidth-optimal
  kRabenseifner,  ///< recursive halving reduce-scatter + recursive doubling allgather
  kDirect,        ///< each rank reduces its own chunk from all others, then allgather
};
/// All-to-all algorithms.
enum class AlltoallAlgo { kPairwise };
/// Barrier algorithms.
enum class BarrierAlgo { kDissemination };

/// The names used on the command line and in tables ("ring", "rabenseifner", ...).
std::string_view name_of(AllreduceAlgo algo);
std::string_view name_of(BroadcastAlgo algo);
std::string_view name_of(ReduceAlgo algo);
std::string_view name_of(AllgatherAlgo algo);
std::string_view name_of(ReduceScatterAlgo algo);
/// Parses a name printed by name_of; InvalidArgument listing the valid names otherwise.
AllreduceAlgo parse_allreduce_algo(std::string_view name);

/// Every rank's `data` becomes root's `data`.
template <class T>
void broadcast(Comm& comm, std::span<T> data, int root, BroadcastAlgo algo = BroadcastAlgo::kBinomial);

/// Root's `data` becomes op over every rank's `data`; other ranks' `data` is
/// scratch (unspecified afterwards).
template <class T>
void reduce(Comm& comm, std::span<T> data, ReduceOp op, int root, ReduceAlgo algo = ReduceAlgo::kBinomial);

/// Root's `out` (p × in.size() elements) receives every rank's `in` in rank order;
/// `out` is ignored on other ranks (may be empty).
template <class T>
void gather(Comm& comm, std::span<const T> in, std::span<T> out, int root);

/// Block i of root's `in` (p × out.size() elements) goes to rank i's `out`;
/// `in` is ignored on other ranks (may be empty).
template <class T>
void scatter(Comm& comm, std::span<const T> in, std::span<T> out, int root);

/// `out` (p × in.size() elements) receives every rank's `in` in rank order.
template <class T>
void allgather(Comm& comm, std::span<const T> in, std::span<T> out,
               AllgatherAlgo algo = AllgatherAlgo::kRing);

/// In-place allgather of uneven chunks (MPI_Allgatherv with MPI_IN_PLACE): on
/// entry chunk rank() of `data` — Chunks(data.size(), p), the layout that
/// reduce_scatter leaves — holds this rank's values; on return every chunk
/// holds its owner's values, on every rank. The other chunks' contents on
/// entry do not matter. An in-place reduce_scatter followed by this is the
/// ring allreduce cut in two, which is how ZeRO and FSDP (chapter 04) reduce
/// gradients to their owners and gather parameters back.
template <class T>
void allgather_in_place(Comm& comm, std::span<T> data, AllgatherAlgo algo = AllgatherAlgo::kRing);

/// Reduces `data` over all ranks and leaves chunk rank() of the result in `out`
/// (Chunks(data.size(), p).size(rank()) elements). `data` is scratch afterwards.
/// `out` may be chunk rank() of `data` itself (in place).
template <class T>
void reduce_scatter(Comm& comm, std::span<T> data, std::span<T> out, ReduceOp op,
                    ReduceScatterAlgo algo = ReduceScatterAlgo::kRing);

/// Block j of `in` (in.size() / p elements) goes to rank j; block i of `out`
/// comes from rank i. in.size() == out.size() and divisible by p.
template <class T>
void alltoall(Comm& comm, std::span<const T> in, std::span<T> out,
              AlltoallAlgo algo = AlltoallAlgo::kPairwise);

/// Every rank's `data` becomes op over every rank's `data` (in place).
template <class T>
void allreduce(Comm& comm, std::span<T> data, ReduceOp op, AllreduceAlgo algo = AllreduceAlgo::kRing);

/// Out-of-place allreduce: `out` becomes op over every rank's `in`; `in` is untouched.
template <class T>
void allreduce(Comm& comm, std::span<const T> in, std::span<T> out, ReduceOp op,
               AllreduceAlgo algo = AllreduceAlgo::kRing);

/// Returns once every rank has entered.
void barrier(Comm& comm, BarrierAlgo algo = BarrierAlgo::kDissemination);

}  // namespace dtw::ch01
