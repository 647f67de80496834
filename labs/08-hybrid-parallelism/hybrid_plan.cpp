// Step 08.2: what one rank of a hybrid run holds.
//
// Three chapters decide it, one axis each, and they compose because each
// works on a different index: tensor parallelism (chapter 06) decides which
// *part of each tensor* the rank computes -- its heads, hidden units and
// vocabulary rows, megatron_shard -- which fixes the rank's flat layout
// (param_layout(config, shard)); the pipeline (chapter 05) decides which
// *units* of that layout the rank runs -- the same cut of units on every
// slice, so the tp ranks of a stage hold matching slices of the same units;
// ZeRO-1 (chapter 04) decides which *elements of the optimizer ranges* the
// rank steps -- its chunk of each over the dp group.
//
//     rank (stage s, replica d, slice k) holds
//       params, grads   units of stage s in layout(shard k)   [+ wte_k copy on the head's stage]
//       optimizer       the same ranges                        (ZeRO-1: chunk d of dp of each)
//       replicated      the tensors shard k does not cut, over the tp group
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
