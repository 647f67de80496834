// Step 08.2: what one rank of a hybrid run holds.
//
// Three chapters decide it, one axis each (the chapter text: "Three axes,
// three indices").
#include "dtw/chunks.h"
#include "dtw/model/params.h"
#include "dtw/model/units.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

train::ReplicaPlan hybrid_plan(const train::RunSpec& spec, const Layout& layout,
                               const ch05::StageMap& map, Coords at) {
  const model::ModelConfig c = spec.config();
  train::ReplicaPlan plan;
  DTW_TODO("08.2: List what this rank holds: its stage's units of its tensor-parallel shard, the replicated tensors, and under ZeRO-1 only its chunk of the optimizer ranges.");
  return plan;
}

}  // namespace dtw::ch08
