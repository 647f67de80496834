// Must not compile: the non-blocking allreduce on std::byte (see allreduce_of_byte.cpp).
#include <cstddef>
#include <span>

#include "nonblocking.h"

dtw::ch01::PendingCollective iallreduce_bytes(dtw::Comm& comm, std::span<std::byte> data) {
  return dtw::ch01::iallreduce(comm, data, dtw::ReduceOp::kSum);
}
