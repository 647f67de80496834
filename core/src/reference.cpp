// The default reference collectives: plain fixed-order algorithms over
// point-to-point on the reserved tag kReferenceTag. Reductions all go through
// rank 0, which combines the contributions strictly in rank order
// ((x0 op x1) op x2) ... and then hands the result out one rank at a time, so
// the result is bitwise the same on every run. Rank 0 moves p times the data:
// slow, and obviously correct, which is what a reference is for. Backends with
// trusted collectives of their own (MPI, NCCL) override these.
#include <cstring>
#include <vector>

#include "dtw/chunks.h"
#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"

namespace dtw {
namespace {

constexpr const char* kOpName = "reference collective";

std::byte* element(void* base, std::int64_t index, DataType type) {
  return static_cast<std::byte*>(base) + index * static_cast<std::int64_t>(size_of(type));
}
const std::byte* element(const void* base, std::int64_t index, DataType type) {
  return static_cast<const std::byte*>(base) + index * static_cast<std::int64_t>(size_of(type));
}

void copy_elements(void* dst, const void* src, std::int64_t count, DataType type) {
  if (count > 0) std::memcpy(dst, src, static_cast<std::size_t>(count) * size_of(type));
}

// kAvg is a sum divided by the group size afterwards (integer division for integers).
void divide_by(Buffer data, int p) { kernels::divide(data, p); }

void check_arrived(int rank, const char* what, int src, std::int64_t got, std::int64_t expected) {
  DTW_CHECK_ARG(got == expected, "rank " << rank << ": reference " << what << ": rank " << src
                                         << " sent " << got << " elements, expected " << expected
                                         << " (the ranks disagree on the count)");
}

void check_root(int rank, int size, const char* what, int root) {
  DTW_CHECK_ARG(root >= 0 && root < size, "rank " << rank << ": reference " << what << " with root "
                                                  << root << ": root out of range [0, " << size
                                                  << ")");
}

void check_nonnegative(int rank, const char* what, std::int64_t count) {
  DTW_CHECK_ARG(count >= 0, "rank " << rank << ": reference " << what << " with count " << count
                                    << ": count is negative");
}

void check_same_type(int rank, const char* what, DataType in, DataType out) {
  DTW_CHECK_ARG(in == out, "rank " << rank << ": reference " << what << ": input is " << name_of(in)
                                   << " but output is " << name_of(out));
}

void check_reducible(int rank, const char* what, DataType type) {
  DTW_CHECK_ARG(type != DataType::kByte,
                "rank " << rank << ": reference " << what << ": cannot reduce raw bytes");
}

}  // namespace

void Comm::internal_send(ConstBuffer data, int dst, int tag, const char* op_name) {
  auto state = start_send(data, dst, tag, op_name);
  const Request guard(state);  // withdraws the send if complete() throws
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), op_name);
  state->completed = true;
}

std::int64_t Comm::internal_recv(Buffer data, int src, int tag, const char* op_name) {
  auto state = start_recv(data, src, tag, op_name);
  const Request guard(state);
  detail::RequestState* s = state.get();
  complete(std::span<detail::RequestState* const>(&s, 1), op_name);
  state->completed = true;
  return state->received_count;
}

void Comm::reference_reduce(Buffer data, ReduceOp op, int root) {
  check_root(rank_, size_, "reduce", root);
  check_nonnegative(rank_, "reduce", data.count);
  check_reducible(rank_, "reduce", data.type);
  if (rank_ == 0) {
    // Rank 0's own data is the accumulator; contributions arrive in rank order.
    std::vector<std::byte> scratch(static_cast<std::size_t>(data.bytes()));
    const Buffer incoming{scratch.data(), data.count, data.type};
    for (int r = 1; r < size_; ++r) {
      check_arrived(rank_, "reduce", r, internal_recv(incoming, r, kReferenceTag, kOpName),
                    data.count);
      kernels::reduce_into(data, incoming, op);
    }
    if (op == ReduceOp::kAvg) divide_by(data, size_);
    if (root != 0) internal_send(data, root, kReferenceTag, kOpName);
  } else {
    internal_send(data, 0, kReferenceTag, kOpName);
    if (rank_ == root)
      check_arrived(rank_, "reduce", 0, internal_recv(data, 0, kReferenceTag, kOpName), data.count);
  }
}

void Comm::reference_broadcast(Buffer data, int root) {
  check_root(rank_, size_, "broadcast", root);
  check_nonnegative(rank_, "broadcast", data.count);
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r)
      if (r != root) internal_send(data, r, kReferenceTag, kOpName);
  } else {
    check_arrived(rank_, "broadcast", root, internal_recv(data, root, kReferenceTag, kOpName),
                  data.count);
  }
}

void Comm::reference_allreduce(Buffer data, ReduceOp op) {
  // Qualified calls: the defaults stay one fixed-order family even when a
  // backend overrides some of them.
  Comm::reference_reduce(data, op, 0);
  Comm::reference_broadcast(data, 0);
}

void Comm::reference_gather(ConstBuffer in, Buffer out, int root) {
  check_root(rank_, size_, "gather", root);
  check_nonnegative(rank_, "gather", in.count);
  if (rank_ != root) {
    internal_send(in, root, kReferenceTag, kOpName);
    return;
  }
  check_same_type(rank_, "gather", in.type, out.type);
  DTW_CHECK_ARG(out.count == size_ * in.count,
                "rank " << rank_ << ": reference gather: output holds " << out.count
                        << " elements, expected size() * input = " << size_ << " * " << in.count);
  for (int r = 0; r < size_; ++r) {
    Buffer block{element(out.data, r * in.count, out.type), in.count, out.type};
    if (r == rank_) {
      copy_elements(block.data, in.data, in.count, in.type);
    } else {
      check_arrived(rank_, "gather", r, internal_recv(block, r, kReferenceTag, kOpName), in.count);
    }
  }
}

void Comm::reference_scatter(ConstBuffer in, Buffer out, int root) {
  check_root(rank_, size_, "scatter", root);
  check_nonnegative(rank_, "scatter", out.count);
  if (rank_ != root) {
    check_arrived(rank_, "scatter", root, internal_recv(out, root, kReferenceTag, kOpName),
                  out.count);
    return;
  }
  check_same_type(rank_, "scatter", in.type, out.type);
  DTW_CHECK_ARG(in.count == size_ * out.count,
                "rank " << rank_ << ": reference scatter: input holds " << in.count
                        << " elements, expected size() * output = " << size_ << " * " << out.count);
  for (int r = 0; r < size_; ++r) {
    const ConstBuffer block{element(in.data, r * out.count, in.type), out.count, in.type};
    if (r == rank_) {
      copy_elements(out.data, block.data, out.count, out.type);
    } else {
      internal_send(block, r, kReferenceTag, kOpName);
    }
  }
}

void Comm::reference_allgather(ConstBuffer in, Buffer out) {
  check_nonnegative(rank_, "allgather", in.count);
  check_same_type(rank_, "allgather", in.type, out.type);
  DTW_CHECK_ARG(out.count == size_ * in.count,
                "rank " << rank_ << ": reference allgather: output holds " << out.count
                        << " elements, expected size() * input = " << size_ << " * " << in.count);
  Comm::reference_gather(in, out, 0);
  Comm::reference_broadcast(out, 0);
}

void Comm::reference_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  check_nonnegative(rank_, "reduce_scatter", in.count);
  check_same_type(rank_, "reduce_scatter", in.type, out.type);
  check_reducible(rank_, "reduce_scatter", in.type);
  const Chunks chunks(in.count, size_);
  DTW_CHECK_ARG(out.count == chunks.size(rank_),
                "rank " << rank_ << ": reference reduce_scatter of " << in.count
                        << " elements: output holds " << out.count << " elements, expected chunk "
                        << rank_ << " of " << size_ << " = " << chunks.size(rank_));
  // Reduce a copy at rank 0 (the input is const), then hand out the chunks.
  std::vector<std::byte> all(static_cast<std::size_t>(in.bytes()));
  copy_elements(all.data(), in.data, in.count, in.type);
  const Buffer whole{all.data(), in.count, in.type};
  Comm::reference_reduce(whole, op, 0);
  if (rank_ == 0) {
    for (int r = 0; r < size_; ++r) {
      const ConstBuffer chunk{element(all.data(), chunks.offset(r), in.type), chunks.size(r),
                              in.type};
      if (r == 0) {
        copy_elements(out.data, chunk.data, chunk.count, chunk.type);
      } else {
        internal_send(chunk, r, kReferenceTag, kOpName);
      }
    }
  } else {
    check_arrived(rank_, "reduce_scatter", 0, internal_recv(out, 0, kReferenceTag, kOpName),
                  out.count);
  }
}

void Comm::reference_alltoall(ConstBuffer in, Buffer out) {
  check_nonnegative(rank_, "alltoall", in.count);
  check_same_type(rank_, "alltoall", in.type, out.type);
  DTW_CHECK_ARG(in.count == out.count && in.count % size_ == 0,
                "rank " << rank_ << ": reference alltoall: input holds " << in.count
                        << " and output " << out.count
                        << " elements; they must be equal and divisible by size() = " << size_);
  // Everything goes through rank 0: it gathers every input, then builds each
  // rank's output (block i from rank i) and sends it.
  const std::int64_t block = in.count / size_;
  std::vector<std::byte> all(rank_ == 0 ? static_cast<std::size_t>(size_ * in.bytes()) : 0);
  const Buffer gathered{all.data(), rank_ == 0 ? size_ * in.count : 0, in.type};
  Comm::reference_gather(in, gathered, 0);
  if (rank_ != 0) {
    check_arrived(rank_, "alltoall", 0, internal_recv(out, 0, kReferenceTag, kOpName), out.count);
    return;
  }
  std::vector<std::byte> assembled(static_cast<std::size_t>(out.bytes()));
  for (int dst = size_ - 1; dst >= 0; --dst) {
    // Rank 0's own output is assembled last, straight into `out`.
    void* target = dst == 0 ? out.data : static_cast<void*>(assembled.data());
    for (int src = 0; src < size_; ++src)
      copy_elements(element(target, src * block, in.type),
                    element(all.data(), src * in.count + dst * block, in.type), block, in.type);
    if (dst != 0)
      internal_send({assembled.data(), out.count, out.type}, dst, kReferenceTag, kOpName);
  }
}

}  // namespace dtw
