// Must not compile: allreduce on std::byte (a Comm sends bytes, but no
// reduction of raw bytes is built) stops the compile with the sentence naming
// the four types, instead of an undefined reference at link time.
#include <cstddef>
#include <span>

#include "collectives.h"

void allreduce_bytes(dtw::Comm& comm, std::span<std::byte> data) {
  dtw::ch01::allreduce(comm, data, dtw::ReduceOp::kSum);
}
