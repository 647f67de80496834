// Must not compile: the local reduction under every collective, on a type it
// is not built for.
#include <cstdint>

#include "dtw/kernels/reduce.h"

void reduce_shorts(short* dst, const short* src, std::int64_t n) {
  dtw::kernels::reduce_into(dst, src, n, dtw::ReduceOp::kSum);
}
