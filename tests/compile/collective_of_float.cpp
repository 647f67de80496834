// Control: chapter 01's collectives on a supported type compile.
#include <span>

#include "collectives.h"

void allreduce_floats(dtw::Comm& comm, std::span<float> data) {
  dtw::ch01::allreduce(comm, data, dtw::ReduceOp::kSum);
}
