// Must not compile: the collectives are instantiated for four types only, and
// any other must stop the compile with a sentence naming them (not fail to link).
#include <span>

#include "collectives.h"

void allreduce_shorts(dtw::Comm& comm, std::span<short> data) {
  dtw::ch01::allreduce(comm, data, dtw::ReduceOp::kSum);
}
