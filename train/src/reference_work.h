#pragma once
// An internal counter of train/src/reference.cpp, for tests.
#include <cstdint>

namespace dtw::train {

// Tensor scales (the RMS of a tensor's expected values, which the relative
// comparison divides by) computed by this process so far. Each is computed
// once per reference run and step count: a regression test reads it, because
// a rank reporting a tensor one row at a time once cost a pass over the
// whole tensor per row (quadratic in its rows).
std::int64_t reference_scales_computed();

}  // namespace dtw::train
