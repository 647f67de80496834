// Must not compile: chapter 05 (pipeline_parallelism.h) is built for float and
// double only.
#include <cstdint>

#include "pipeline_parallelism.h"

std::int64_t peak_of_shorts(const dtw::ch05::Schedule& schedule, const dtw::ch05::StageMap& map,
                            const dtw::train::RunSpec& spec) {
  return dtw::ch05::activation_peak<short>(schedule, map, spec, 0, false);
}
