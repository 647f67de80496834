#pragma once
/// @file
/// Typed wrappers of the backend's trusted reference collectives
/// (`Comm::reference_*`), which tests and benchmarks compare the learner's
/// algorithms against. Each takes any contiguous range of dtw element types
/// (std::vector, std::span, std::array, ...):
///
///     std::vector<float> expected = mine;
///     dtw::reference::allreduce(comm, expected, dtw::ReduceOp::kSum);
///
/// All are collective: every rank of `comm` calls them with the same counts,
/// op and root. On the threads backend the result is bitwise reproducible:
/// rank 0 combines the contributions in rank order 0, 1, ..., p-1.

#include "dtw/chunks.h"
#include "dtw/comm.h"
#include "dtw/types.h"

namespace dtw::reference {

/// `data` on every rank becomes op over every rank's `data` (kAvg: the sum
/// divided by the group size, integer division for integers).
template <detail::ElementRange R>
void allreduce(Comm& comm, R&& data, ReduceOp op) {
  comm.reference_allreduce(detail::mutable_view(data), op);
}

/// `data` on every rank becomes root's `data`.
template <detail::ElementRange R>
void broadcast(Comm& comm, R&& data, int root) {
  comm.reference_broadcast(detail::mutable_view(data), root);
}

/// Root's `data` becomes op over every rank's `data`; other ranks' `data` is unspecified after.
template <detail::ElementRange R>
void reduce(Comm& comm, R&& data, ReduceOp op, int root) {
  comm.reference_reduce(detail::mutable_view(data), op, root);
}

/// `out` (size() × in.size() elements) receives every rank's `in` in rank order.
template <detail::ElementRange In, detail::ElementRange Out>
void allgather(Comm& comm, const In& in, Out&& out) {
  comm.reference_allgather(detail::const_view(in), detail::mutable_view(out));
}

/// Reduces `in` over all ranks; `out` receives chunk rank() of the result
/// (Chunks(in.size(), size()).size(rank()) elements).
template <detail::ElementRange In, detail::ElementRange Out>
void reduce_scatter(Comm& comm, const In& in, Out&& out, ReduceOp op) {
  comm.reference_reduce_scatter(detail::const_view(in), detail::mutable_view(out), op);
}

/// Block j of `in` goes to rank j; block i of `out` comes from rank i
/// (in.size() == out.size(), divisible by size()).
template <detail::ElementRange In, detail::ElementRange Out>
void alltoall(Comm& comm, const In& in, Out&& out) {
  comm.reference_alltoall(detail::const_view(in), detail::mutable_view(out));
}

/// Root's `out` (size() × in.size() elements) receives every rank's `in` in
/// rank order; `out` is ignored on other ranks (may be empty).
template <detail::ElementRange In, detail::ElementRange Out>
void gather(Comm& comm, const In& in, Out&& out, int root) {
  comm.reference_gather(detail::const_view(in), detail::mutable_view(out), root);
}

/// Block i of root's `in` (size() × out.size() elements) goes to rank i's
/// `out`; `in` is ignored on other ranks (may be empty).
template <detail::ElementRange In, detail::ElementRange Out>
void scatter(Comm& comm, const In& in, Out&& out, int root) {
  comm.reference_scatter(detail::const_view(in), detail::mutable_view(out), root);
}

}  // namespace dtw::reference
