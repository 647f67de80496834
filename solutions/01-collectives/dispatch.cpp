// The public face of chapter 01: every function of collectives.h checks its
// arguments, announces the call to the fingerprint check, and hands the work to
// the chosen algorithm (one file each, declared in algorithms.h). Done here
// once, so that no algorithm has to:
// - checks that raise dtw::InvalidArgument naming the rank and the values (a
//   root out of range, buffers of the wrong size) before any message moves;
// - comm.verify_collective: when the check is on, ranks that called different
//   collectives, counts, types, ops, roots or algorithms fail instead of hanging;
// - ReduceOp::kAvg: the algorithms sum, and the result is divided by p once;
// - out-of-place forms: copy `in` to `out`, then run in place.
// - messages: the algorithm talks on comm.collective_channel() (a context of
//   its own, which the caller's point-to-point can never reach) with the tag
//   comm.next_collective_tag() gives this operation (so collectives in flight
//   together on one communicator never take each other's messages).
// The copy and the division go through comm.copy_local and comm.divide_local
// rather than std::copy and a loop: on the nccl backend the data is in GPU
// memory, which only the backend (a CUDA copy, a CUDA kernel) may touch.
#include "algorithms.h"
#include "collectives.h"

namespace dtw::ch01 {
namespace {

// The name carries the algorithm too ("allreduce:ring", algo_names.cpp): ranks
// that pick different algorithms would otherwise exchange messages that never
// match.
template <class T>
void announce(Comm& comm, const char* name, std::int64_t count, int op, int root) {
  comm.verify_collective(
      {.name = name, .count = count, .type = data_type_of<T>(), .op = op, .root = root});
}

void check_root(const Comm& comm, const char* what, int root) {
  DTW_CHECK_ARG(root >= 0 && root < comm.size(), "rank " << comm.rank() << ": " << what << ": root "
                                                         << root << " is out of range [0, "
                                                         << comm.size() << ")");
}

// Averages are sums divided by the group size (integer division for integers).
template <class T>
void divide_if_avg(Comm& comm, std::span<T> data, ReduceOp op) {
  if (op == ReduceOp::kAvg) comm.divide_local(data, comm.size());
}

// Where one collective operation talks: the channel, and this operation's tag.
struct Slot {
  Comm& comm;
  int tag;
};
Slot slot_of(Comm& comm) {
  Comm& channel = comm.collective_channel();
  return {channel, comm.next_collective_tag()};
}

ReduceOp sum_if_avg(ReduceOp op) {
  return op == ReduceOp::kAvg ? ReduceOp::kSum : op;
}

}  // namespace

template <NumericElement T>
void broadcast(Comm& comm, std::span<T> data, int root, BroadcastAlgo algo) {
  detail::check_algo(comm, "broadcast", algo, detail::call_names(algo).size());
  announce<T>(comm, detail::call_name(algo), std::ssize(data), -1, root);
  check_root(comm, "broadcast", root);
  const Slot s = slot_of(comm);
  switch (algo) {
    case BroadcastAlgo::kLinear: return detail::broadcast_linear(s.comm, data, root, s.tag);
    case BroadcastAlgo::kBinomial: return detail::broadcast_binomial(s.comm, data, root, s.tag);
    case BroadcastAlgo::kScatterAllgather:
      return detail::broadcast_scatter_allgather(s.comm, data, root, s.tag);
  }
}

template <NumericElement T>
void reduce(Comm& comm, std::span<T> data, ReduceOp op, int root, ReduceAlgo algo) {
  detail::check_algo(comm, "reduce", algo, detail::call_names(algo).size());
  detail::check_op(comm, "reduce", op);
  announce<T>(comm, detail::call_name(algo), std::ssize(data), static_cast<int>(op), root);
  check_root(comm, "reduce", root);
  const Slot s = slot_of(comm);
  if (algo == ReduceAlgo::kLinear) {
    detail::reduce_linear(s.comm, data, sum_if_avg(op), root, s.tag);
  } else {
    detail::reduce_binomial(s.comm, data, sum_if_avg(op), root, s.tag);
  }
  if (comm.rank() == root) divide_if_avg(comm, data, op);
}

template <NumericElement T>
void gather(Comm& comm, std::span<const T> in, std::span<T> out, int root) {
  announce<T>(comm, "gather", std::ssize(in), -1, root);
  check_root(comm, "gather", root);
  const std::int64_t p = comm.size(), m = std::ssize(in);
  DTW_CHECK_ARG(comm.rank() != root || std::ssize(out) == p * m,
                "rank " << comm.rank() << ": gather at root: out has " << out.size()
                        << " elements, expected p * in = " << p << " * " << m << " = " << p * m);
  const Slot s = slot_of(comm);
  detail::gather_linear(s.comm, in, out, root, s.tag);
}

template <NumericElement T>
void scatter(Comm& comm, std::span<const T> in, std::span<T> out, int root) {
  announce<T>(comm, "scatter", std::ssize(out), -1, root);
  check_root(comm, "scatter", root);
  const std::int64_t p = comm.size(), m = std::ssize(out);
  DTW_CHECK_ARG(comm.rank() != root || std::ssize(in) == p * m,
                "rank " << comm.rank() << ": scatter at root: in has " << in.size()
                        << " elements, expected p * out = " << p << " * " << m << " = " << p * m);
  const Slot s = slot_of(comm);
  detail::scatter_linear(s.comm, in, out, root, s.tag);
}

template <NumericElement T>
void allgather(Comm& comm, std::span<const T> in, std::span<T> out, AllgatherAlgo algo) {
  detail::check_algo(comm, "allgather", algo, detail::call_names(algo).size());
  announce<T>(comm, detail::call_name(algo), std::ssize(in), -1, -1);
  const int p = comm.size();
  const std::int64_t m = std::ssize(in);
  DTW_CHECK_ARG(std::ssize(out) == p * m,
                "rank " << comm.rank() << ": allgather: out has " << out.size()
                        << " elements, expected p * in = " << p << " * " << m << " = " << p * m);
  // p equal blocks of m: Chunks(p·m, p) makes exactly that layout.
  const Chunks blocks(p * m, p);
  comm.copy_local(blocks.of(out, comm.rank()), in);
  const Slot s = slot_of(comm);
  if (algo == AllgatherAlgo::kRing) {
    detail::allgather_ring(s.comm, out, blocks, s.tag);
  } else {
    detail::allgather_recursive_doubling(s.comm, out, blocks, s.tag);
  }
}

// The ring and recursive doubling walk any Chunks layout (a message carries its
// chunk's size), so the uneven in-place form is the same call without the copy.
template <NumericElement T>
void allgather_in_place(Comm& comm, std::span<T> data, AllgatherAlgo algo) {
  detail::check_algo(comm, "allgather_in_place", algo, detail::call_names(algo).size());
  announce<T>(comm,
              algo == AllgatherAlgo::kRing ? "allgather_in_place:ring"
                                           : "allgather_in_place:recursive-doubling",
              std::ssize(data), -1, -1);
  const Chunks chunks(std::ssize(data), comm.size());
  const Slot s = slot_of(comm);
  if (algo == AllgatherAlgo::kRing) {
    detail::allgather_ring(s.comm, data, chunks, s.tag);
  } else {
    detail::allgather_recursive_doubling(s.comm, data, chunks, s.tag);
  }
}

template <NumericElement T>
void reduce_scatter(Comm& comm, std::span<T> data, std::span<T> out, ReduceOp op,
                    ReduceScatterAlgo algo) {
  detail::check_algo(comm, "reduce_scatter", algo, detail::call_names(algo).size());
  detail::check_op(comm, "reduce_scatter", op);
  announce<T>(comm, detail::call_name(algo), std::ssize(data), static_cast<int>(op),
              -1);
  const Chunks chunks(std::ssize(data), comm.size());
  const std::int64_t mine = chunks.size(comm.rank());
  DTW_CHECK_ARG(std::ssize(out) == mine,
                "rank " << comm.rank() << ": reduce_scatter of " << data.size() << " elements over "
                        << comm.size() << " ranks: out has " << out.size()
                        << " elements, expected this rank's chunk of " << mine);
  const Slot s = slot_of(comm);
  if (algo == ReduceScatterAlgo::kRing) {
    detail::reduce_scatter_ring(s.comm, data, chunks, sum_if_avg(op), s.tag);
  } else {
    detail::reduce_scatter_recursive_halving(s.comm, data, chunks, sum_if_avg(op), s.tag);
  }
  comm.copy_local(out, chunks.of(data, comm.rank()));
  divide_if_avg(comm, out, op);
}

template <NumericElement T>
void alltoall(Comm& comm, std::span<const T> in, std::span<T> out, AlltoallAlgo algo) {
  detail::check_algo(comm, "alltoall", algo, 1);
  announce<T>(comm, "alltoall:pairwise", std::ssize(in), -1, -1);
  const int p = comm.size();
  DTW_CHECK_ARG(in.size() == out.size() && std::ssize(in) % p == 0,
                "rank " << comm.rank() << ": alltoall: in has " << in.size() << " and out "
                        << out.size()
                        << " elements; they must be equal and divisible by p = " << p);
  // A block of `out` may land before the block of `in` at the same place has left.
  DTW_CHECK_ARG(!detail::overlap(in, out),
                "rank " << comm.rank() << ": alltoall: in and out overlap; use two buffers");
  const Slot s = slot_of(comm);
  detail::alltoall_pairwise(s.comm, in, out, s.tag);
}

template <NumericElement T>
void allreduce(Comm& comm, std::span<T> data, ReduceOp op, AllreduceAlgo algo) {
  detail::check_algo(comm, "allreduce", algo, detail::call_names(algo).size());
  detail::check_op(comm, "allreduce", op);
  announce<T>(comm, detail::call_name(algo), std::ssize(data), static_cast<int>(op), -1);
  const ReduceOp sum_op = sum_if_avg(op);
  const Slot s = slot_of(comm);
  switch (algo) {
    case AllreduceAlgo::kNaive: detail::allreduce_naive(s.comm, data, sum_op, s.tag); break;
    case AllreduceAlgo::kBinomial: detail::allreduce_binomial(s.comm, data, sum_op, s.tag); break;
    case AllreduceAlgo::kRing: detail::allreduce_ring(s.comm, data, sum_op, s.tag); break;
    case AllreduceAlgo::kRabenseifner: detail::allreduce_rabenseifner(s.comm, data, sum_op, s.tag); break;
    case AllreduceAlgo::kDirect: detail::allreduce_direct(s.comm, data, sum_op, s.tag); break;
  }
  divide_if_avg(comm, data, op);
}

template <NumericElement T>
void allreduce(Comm& comm, std::span<const T> in, std::span<T> out, ReduceOp op,
               AllreduceAlgo algo) {
  DTW_CHECK_ARG(in.size() == out.size(), "rank " << comm.rank() << ": allreduce: in has "
                                                 << in.size() << " elements but out has "
                                                 << out.size());
  comm.copy_local(out, in);  // a no-op when in and out are the same memory
  allreduce(comm, out, op, algo);
}

void barrier(Comm& comm, BarrierAlgo algo) {
  detail::check_algo(comm, "barrier", algo, 1);
  comm.verify_collective({.name = "barrier:dissemination", .count = 0, .type = DataType::kByte});
  const Slot s = slot_of(comm);
  detail::barrier_dissemination(s.comm, s.tag);
}

#define DTW_INSTANTIATE(T)                                                                         \
  template void broadcast<T>(Comm&, std::span<T>, int, BroadcastAlgo);                             \
  template void reduce<T>(Comm&, std::span<T>, ReduceOp, int, ReduceAlgo);                         \
  template void gather<T>(Comm&, std::span<const T>, std::span<T>, int);                           \
  template void scatter<T>(Comm&, std::span<const T>, std::span<T>, int);                          \
  template void allgather<T>(Comm&, std::span<const T>, std::span<T>, AllgatherAlgo);              \
  template void allgather_in_place<T>(Comm&, std::span<T>, AllgatherAlgo);                         \
  template void reduce_scatter<T>(Comm&, std::span<T>, std::span<T>, ReduceOp, ReduceScatterAlgo); \
  template void alltoall<T>(Comm&, std::span<const T>, std::span<T>, AlltoallAlgo);                \
  template void allreduce<T>(Comm&, std::span<T>, ReduceOp, AllreduceAlgo);                        \
  template void allreduce<T>(Comm&, std::span<const T>, std::span<T>, ReduceOp, AllreduceAlgo);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01
