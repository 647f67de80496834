// Chapter 07's strategies for `dtw train --strategy` and `dtw bench train`.
#include "dtw/train/strategy.h"
#include "sequence_parallelism.h"

namespace dtw::ch07 {
namespace {

DTW_REGISTER_STRATEGY({.name = "sp-ring",
                       .chapter = "07",
                       .description = "ring attention",
                       .min_ranks = 1,
                       .run = [](auto& run) { sp_ring(run); }});

}  // namespace
}  // namespace dtw::ch07
